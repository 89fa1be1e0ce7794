// The Jinja2 parser: one recursive-descent function per grammar rule of the statements and the
// expression precedence ladder. Kept in one file (over 600 lines) because the rules call each other
// throughout; split by rule it would only scatter one grammar.
#include "jinja/parser.h"

#include <initializer_list>

#include "base/error.h"
#include "jinja/builtins.h"

namespace ember::jinja {

namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::End: return "end of template";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != Tok::End) fail(cur(), "unexpected " + describe(cur()));
    return body;
  }

 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
  // The syntax tree's height stays under kMaxNesting so that parsing, rendering and freeing it
  // cannot run out of stack: nested blocks and brackets count (depth_), and so does each chained
  // operator of the statement or print expression being parsed (chain_), as `a + b + c` nests
  // to the left.
  static constexpr size_t kMaxNesting = 256;
  size_t depth_ = 0;
  size_t chain_ = 0;

  void check_nesting(const Token& t) const {
    if (depth_ + chain_ > kMaxNesting)
      fail(t, "template nested too deeply (more than " + std::to_string(kMaxNesting) +
                  " levels of blocks, brackets and chained operators)");
  }
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      ++p.depth_;
      p.check_nesting(p.cur());
    }
    ~Nest() { --p.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };
  // One more link of a left-nested chain (binary operators, attributes, calls, filters).
  void chain() {
    ++chain_;
    check_nesting(cur());
  }

  const Token& cur() const { return toks_[i_]; }
  const Token& look(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  const Token& next() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }

  [[noreturn]] static void fail(const Token& t, const std::string& what) { throw Error(at(t.pos, what)); }

  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  const Token& expect_op(std::string_view op) {
    if (!is_op(op)) fail(cur(), "expected '" + std::string(op) + "', got " + describe(cur()));
    return next();
  }
  const Token& expect_name() {
    if (cur().type != Tok::Name) fail(cur(), "expected name, got " + describe(cur()));
    return next();
  }
  void expect_name(std::string_view n) {
    if (!is_name(n)) fail(cur(), "expected '" + std::string(n) + "', got " + describe(cur()));
    next();
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
    next();
  }

  // Statements until a {% name %} whose name is one of `ends` (left as the current token).
  Body subparse(std::initializer_list<std::string_view> ends) {
    const Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::End) {
        if (ends.size() != 0)
          fail(t, "unexpected end of template, expected '" + std::string(*ends.begin()) + "'");
        return body;
      }
      if (t.type == Tok::Data) {
        body.push_back(std::make_unique<OutputStmt>(t.pos, t.text));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        chain_ = 0;
        auto e = parse_tuple(false, true);
        if (cur().type != Tok::VarEnd) fail(cur(), "expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::make_unique<EmitStmt>(t.pos, std::move(e)));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type != Tok::Name) fail(cur(), "tag name expected");
        for (auto e : ends)
          if (cur().text == e) return body;
        chain_ = 0;
        body.push_back(parse_statement());
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
  }

  // After a body ending at {% end... %}: consume that name and the %}.
  void end_block(std::string_view name) {
    expect_name(name);
    expect_block_end();
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    const std::string& n = t.text;
    const Pos p = t.pos;
    if (n == "for") return parse_for();
    if (n == "if") return parse_if();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call_block();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "break" || n == "continue") {
      next();
      expect_block_end();
      return std::make_unique<Stmt>(n == "break" ? StmtType::Break : StmtType::Continue, p);
    }
    if (n == "generation" || n == "block") {
      next();
      if (n == "block") {
        expect_name();
        skip_name("scoped");
        skip_name("required");
      }
      expect_block_end();
      auto s = std::make_unique<ScopeStmt>(p);
      s->body = subparse({n == "block" ? "endblock" : "endgeneration"});
      next();
      if (n == "block" && cur().type == Tok::Name) next();
      expect_block_end();
      return s;
    }
    fail(t, "unsupported or unknown tag '" + n + "'");
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(cur().pos);
    next();
    s->target = parse_target(false, {"in"});
    expect_name("in");
    s->iter = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->filter = parse_expression();
    if (skip_name("recursive")) s->recursive = true;
    expect_block_end();
    s->body = subparse({"endfor", "else"});
    if (skip_name("else")) {
      expect_block_end();
      s->otherwise = subparse({"endfor"});
    }
    end_block("endfor");
    return s;
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(cur().pos);
    next();
    while (true) {
      auto cond = parse_tuple(false, true);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect_block_end();
        s->otherwise = subparse({"endif"});
      }
      break;
    }
    end_block("endif");
    return s;
  }

  StmtPtr parse_set() {
    const Pos p = cur().pos;
    next();
    Target target = parse_target(true, {});
    if (skip_op("=")) {
      auto s = std::make_unique<SetStmt>(p);
      s->target = std::move(target);
      s->value = parse_tuple(false, true);
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(p);
    s->target = std::move(target);
    s->filters = parse_filter_chain(false);
    expect_block_end();
    s->body = subparse({"endset"});
    end_block("endset");
    return s;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(cur().pos);
    next();
    s->name = expect_name().text;
    s->params = parse_signature();
    expect_block_end();
    const size_t body_start = i_;
    s->body = subparse({"endmacro"});
    note_special_names(s->params, body_start);
    end_block("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<CallBlockStmt>(cur().pos);
    next();
    if (is_op("(")) s->params = parse_signature();
    auto e = parse_expression();
    if (e->type != ExprType::Call) fail(cur(), "expected call");
    s->call.reset(static_cast<CallExpr*>(e.release()));
    expect_block_end();
    const size_t body_start = i_;
    s->body = subparse({"endcall"});
    note_special_names(s->params, body_start);
    end_block("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(cur().pos);
    next();
    s->filters = parse_filter_chain(true);
    expect_block_end();
    s->body = subparse({"endfilter"});
    end_block("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<WithStmt>(cur().pos);
    next();
    while (cur().type != Tok::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      Target t = parse_target(false, {});
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression());
    }
    expect_block_end();
    s->body = subparse({"endwith"});
    end_block("endwith");
    return s;
  }

  // Records which of varargs, kwargs and caller the body just parsed (tokens from `start`) names.
  void note_special_names(MacroParams& params, size_t start) const {
    for (size_t k = start; k < i_; ++k) {
      if (toks_[k].type != Tok::Name) continue;
      params.uses_varargs = params.uses_varargs || toks_[k].text == "varargs";
      params.uses_kwargs = params.uses_kwargs || toks_[k].text == "kwargs";
      params.uses_caller = params.uses_caller || toks_[k].text == "caller";
    }
  }

  MacroParams parse_signature() {
    MacroParams params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.names.empty()) expect_op(",");
      if (is_op(")")) break;
      const Token& name = expect_name();
      params.names.push_back(name.text);
      if (skip_op("=")) params.defaults.push_back(parse_expression());
      else if (!params.defaults.empty() && params.defaults.back()) fail(name, "non-default argument follows default argument");
      else params.defaults.push_back(nullptr);
    }
    expect_op(")");
    return params;
  }

  // `| f(args) | g` after {% set x %} or `f | g` after {% filter %}.
  std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain(bool first_without_pipe) {
    std::vector<std::unique_ptr<FilterExpr>> chain;
    bool first = true;
    while (true) {
      if (!(first && first_without_pipe) && !skip_op("|")) break;
      first = false;
      chain.push_back(parse_filter(nullptr));
    }
    return chain;
  }

  Target parse_target(bool with_namespace, std::initializer_list<std::string_view> extra_end) {
    const Nest nest(*this);
    Target tuple;
    tuple.kind = Target::Kind::Tuple;
    tuple.pos = cur().pos;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) expect_op(",");
      bool end = cur().type == Tok::BlockEnd || is_op("=") || is_op(")") || is_op("|");
      for (auto e : extra_end) end = end || is_name(e);
      if (end && !tuple.items.empty()) break;
      Target t;
      t.pos = cur().pos;
      if (skip_op("(")) {
        t = parse_target(with_namespace, {});
        expect_op(")");
      } else {
        t.name = expect_name().text;
        if (with_namespace && skip_op(".")) {
          t.kind = Target::Kind::NsAttr;
          t.attr = expect_name().text;
        }
      }
      tuple.items.push_back(std::move(t));
      if (!is_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) return std::move(tuple.items[0]);
    return tuple;
  }

  bool tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::End) return true;
    if (t.type == Tok::Op && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == "=")) return true;
    for (auto e : extra_end)
      if (is_name(e)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool explicit_parens, bool with_condexpr, std::initializer_list<std::string_view> extra_end = {}) {
    const Pos p = cur().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression() : parse_or());
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail(cur(), "Expected an expression, got " + describe(cur()));
    }
    auto t = std::make_unique<SeqExpr>(ExprType::Tuple, p);
    t->items = std::move(items);
    return t;
  }

  ExprPtr parse_expression() {
    const Nest nest(*this);
    const Pos p = cur().pos;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      chain();
      auto c = std::make_unique<CondExpr>(p);
      c->then = std::move(e);
      c->cond = parse_or();
      if (skip_name("else")) c->otherwise = parse_expression();
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      chain();
      const Pos p = next().pos;
      left = std::make_unique<BinaryExpr>(ExprType::Or, p, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      chain();
      const Pos p = next().pos;
      left = std::make_unique<BinaryExpr>(ExprType::And, p, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const Nest nest(*this);
      const Pos p = next().pos;
      return std::make_unique<UnaryExpr>(ExprType::Not, p, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Pos p = cur().pos;
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CmpOp op;
      const Token& t = cur();
      if (t.type == Tok::Op && t.text == "==") op = CmpOp::Eq;
      else if (t.type == Tok::Op && t.text == "!=") op = CmpOp::Ne;
      else if (t.type == Tok::Op && t.text == "<") op = CmpOp::Lt;
      else if (t.type == Tok::Op && t.text == "<=") op = CmpOp::Le;
      else if (t.type == Tok::Op && t.text == ">") op = CmpOp::Gt;
      else if (t.type == Tok::Op && t.text == ">=") op = CmpOp::Ge;
      else if (is_name("in")) op = CmpOp::In;
      else if (is_name("not") && look().type == Tok::Name && look().text == "in") op = CmpOp::NotIn;
      else break;
      next();
      if (op == CmpOp::NotIn) next();
      if (!cmp) cmp = std::make_unique<CompareExpr>(p, std::move(first));
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (cmp) return cmp;
    return first;
  }

  ExprPtr binary(BinOp op, Pos p, ExprPtr l, ExprPtr r) {
    auto b = std::make_unique<BinaryExpr>(ExprType::Binary, p, std::move(l), std::move(r));
    b->op = op;
    return b;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      chain();
      const Token& t = next();
      left = binary(t.text == "+" ? BinOp::Add : BinOp::Sub, t.pos, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const Pos p = cur().pos;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = std::make_unique<ConcatExpr>(p);
    c->parts.push_back(std::move(first));
    while (skip_op("~")) c->parts.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain();
      const Token& t = next();
      const BinOp op = t.text == "*" ? BinOp::Mul : t.text == "/" ? BinOp::Div : t.text == "//" ? BinOp::FloorDiv : BinOp::Mod;
      left = binary(op, t.pos, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      chain();
      const Pos p = next().pos;
      left = binary(BinOp::Pow, p, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Nest nest(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = std::make_unique<UnaryExpr>(t.text == "-" ? ExprType::Neg : ExprType::Pos, t.pos, parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::Name: {
        next();
        if (t.text == "true" || t.text == "True") return std::make_unique<LiteralExpr>(t.pos, Value(true));
        if (t.text == "false" || t.text == "False") return std::make_unique<LiteralExpr>(t.pos, Value(false));
        if (t.text == "none" || t.text == "None") return std::make_unique<LiteralExpr>(t.pos, Value::none());
        return std::make_unique<NameExpr>(t.pos, t.text);
      }
      case Tok::String: {
        std::string s;
        const Pos p = t.pos;
        while (cur().type == Tok::String) s += next().text;
        return std::make_unique<LiteralExpr>(p, Value(std::move(s)));
      }
      case Tok::Int: next(); return std::make_unique<LiteralExpr>(t.pos, Value(t.int_value));
      case Tok::Float: next(); return std::make_unique<LiteralExpr>(t.pos, Value(t.float_value));
      case Tok::Op:
        if (t.text == "(") {
          next();
          auto e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto l = std::make_unique<SeqExpr>(ExprType::List, t.pos);
          while (!is_op("]")) {
            if (!l->items.empty()) expect_op(",");
            if (is_op("]")) break;
            l->items.push_back(parse_expression());
          }
          expect_op("]");
          return l;
        }
        if (t.text == "{") {
          next();
          auto d = std::make_unique<DictExpr>(t.pos);
          while (!is_op("}")) {
            if (!d->items.empty()) expect_op(",");
            if (is_op("}")) break;
            auto k = parse_expression();
            expect_op(":");
            d->items.emplace_back(std::move(k), parse_expression());
          }
          expect_op("}");
          return d;
        }
        break;
      default: break;
    }
    fail(t, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[") || is_op("(")) chain();
      if (is_op(".")) {
        const Pos p = next().pos;
        const Token& a = cur();
        if (a.type == Tok::Name) {
          next();
          node = std::make_unique<AttrExpr>(p, std::move(node), a.text);
        } else if (a.type == Tok::Int) {
          next();
          node = std::make_unique<ItemExpr>(p, std::move(node), std::make_unique<LiteralExpr>(a.pos, Value(a.int_value)));
        } else {
          fail(a, "expected name or number");
        }
      } else if (is_op("[")) {
        const Pos p = next().pos;
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
          if (!args.empty()) expect_op(",");
          args.push_back(parse_subscribed());
        }
        expect_op("]");
        ExprPtr index;
        if (args.size() == 1) {
          index = std::move(args[0]);
        } else {
          auto t = std::make_unique<SeqExpr>(ExprType::Tuple, p);
          t->items = std::move(args);
          index = std::move(t);
        }
        node = std::make_unique<ItemExpr>(p, std::move(node), std::move(index));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscribed() {
    const Pos p = cur().pos;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto s = std::make_unique<SliceExpr>(p);
    s->start = std::move(start);
    if (!is_op("]") && !is_op(",") && !is_op(":")) s->stop = parse_expression();
    if (skip_op(":"))
      if (!is_op("]") && !is_op(",")) s->step = parse_expression();
    return s;
  }

  Args parse_args() {
    Args args;
    const Token& open = expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        args.star = parse_expression();
      } else if (skip_op("**")) {
        args.double_star = parse_expression();
      } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        std::string key = next().text;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty() || args.star || args.double_star)
          fail(open, "invalid syntax for function call expression");
        args.positional.push_back(parse_expression());
      }
      need_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = std::make_unique<CallExpr>(cur().pos, std::move(callee));
    c->args = parse_args();
    return c;
  }

  std::string dotted_name() {
    std::string name = expect_name().text;
    while (is_op(".") && look().type == Tok::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  std::unique_ptr<FilterExpr> parse_filter(ExprPtr subject) {
    const Pos p = cur().pos;
    const Token& name_tok = cur();
    auto f = std::make_unique<FilterExpr>(p, std::move(subject), dotted_name());
    if (!find_filter(f->name)) fail(name_tok, "No filter named '" + f->name + "'.");
    if (is_op("(")) f->args = parse_args();
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|") || is_name("is") || is_op("(")) chain();
      if (skip_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        const Pos p = next().pos;
        const bool negated = skip_name("not");
        const Token& name_tok = cur();
        auto t = std::make_unique<TestExpr>(p, std::move(node), dotted_name());
        if (!find_test(t->name)) fail(name_tok, "No test named '" + t->name + "'.");
        t->negated = negated;
        const Token& c = cur();
        if (is_op("(")) {
          t->args = parse_args();
        } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int || c.type == Tok::Float ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(c, "You cannot chain multiple tests with is");
          t->args.positional.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }
};

}  // namespace

Body parse(std::string_view source) { return Parser(tokenize(source)).parse_template(); }

}  // namespace ember::jinja
