// The Jinja2 tree-walking interpreter: statements, expressions, calls, macros and loop state over one
// shared scope stack. Kept in one file (over 600 lines) because every node kind evaluates through the
// same private helpers; filters, tests, methods and globals live in their own files.
#include "jinja/interpreter.h"

#include <cmath>

#include "base/error.h"
#include "jinja/builtins.h"
#include "jinja/pystr.h"

namespace ember::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

void raise_undefined(const Value& v) {
  if (v.undefined_hint().empty()) throw RenderError("value is undefined");
  throw RenderError(v.undefined_hint());
}

namespace {

// Jinja2's object_type_repr: "dict object", "None".
std::string object_type(const Value& v) {
  if (v.is_none()) return "None";
  if (v.kind() == Kind::Namespace) return "jinja2.utils.Namespace object";
  return v.type_name() + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type(obj) + "' has no attribute '" + name + "'");
}

Value missing_element(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  return Value::undefined(object_type(obj) + " has no element " + key.repr());
}

[[noreturn]] void type_error(const std::string& what) { throw RenderError(what); }

void check_overflow(bool overflow) {
  if (overflow) throw RenderError("integer overflow");
}

// Python's slice.indices(): clamps start/stop for a sequence of `len` items.
void slice_bounds(int64_t len, const Value& start, const Value& stop, const Value& step_v, int64_t& b, int64_t& e,
                  int64_t& step) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      throw RenderError(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  step = as_index(step_v, "step").value_or(1);
  if (step == 0) throw RenderError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> x, int64_t dflt) {
    if (!x) return dflt;
    int64_t v = *x;
    if (v < 0) {
      v += len;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= len) {
      v = step < 0 ? len - 1 : len;
    }
    return v;
  };
  b = clamp(as_index(start, "start"), step < 0 ? len - 1 : 0);
  e = clamp(as_index(stop, "stop"), step < 0 ? -1 : len);
}

template <typename Seq, typename Get>
Seq take_slice(int64_t b, int64_t e, int64_t step, Get get) {
  Seq out;
  if (step > 0)
    for (int64_t k = b; k < e; k += step) get(out, k);
  else
    for (int64_t k = b; k > e; k += step) get(out, k);
  return out;
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  int64_t b, e, step;
  if (obj.is_sequence()) {
    const List& items = obj.items();
    slice_bounds(static_cast<int64_t>(items.size()), start, stop, step_v, b, e, step);
    List out = take_slice<List>(b, e, step, [&](List& o, int64_t k) { o.push_back(items[static_cast<size_t>(k)]); });
    return obj.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (obj.is_string()) {
    const std::u32string cps = pystr::decode(obj.str());
    slice_bounds(static_cast<int64_t>(cps.size()), start, stop, step_v, b, e, step);
    return Value(pystr::encode(
        take_slice<std::u32string>(b, e, step, [&](std::u32string& o, int64_t k) { o += cps[static_cast<size_t>(k)]; })));
  }
  if (obj.is_undefined()) raise_undefined(obj);
  type_error("'" + obj.type_name() + "' object is not subscriptable");
}

double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::String:
      if (!item.is_string())
        type_error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
    case Kind::Tuple:
      for (const auto& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Kind::Dict: return container.map().find(item) != nullptr;
    case Kind::Undefined: return false;
    default: type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value arithmetic(BinOp op, const Value& a, const Value& b, size_t max_bytes) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  static constexpr const char* names[] = {"+", "-", "*", "/", "//", "%", "**"};
  auto unsupported = [&]() -> Value {
    type_error(std::string("unsupported operand type(s) for ") + names[static_cast<int>(op)] + ": '" + a.type_name() +
               "' and '" + b.type_name() + "'");
  };
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
    const double fx = a.as_double(), fy = b.as_double();
    int64_t r = 0;
    switch (op) {
      case BinOp::Add:
        if (ints) {
          check_overflow(__builtin_add_overflow(x, y, &r));
          return r;
        }
        return fx + fy;
      case BinOp::Sub:
        if (ints) {
          check_overflow(__builtin_sub_overflow(x, y, &r));
          return r;
        }
        return fx - fy;
      case BinOp::Mul:
        if (ints) {
          check_overflow(__builtin_mul_overflow(x, y, &r));
          return r;
        }
        return fx * fy;
      case BinOp::Div:
        if (fy == 0) type_error(ints ? "division by zero" : "float division by zero");
        return fx / fy;
      case BinOp::FloorDiv:
        if (ints) {
          if (y == 0) type_error("integer division or modulo by zero");
          int64_t q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return q;
        }
        if (fy == 0) type_error("float floor division by zero");
        return std::floor(fx / fy);
      case BinOp::Mod:
        if (ints) {
          if (y == 0) type_error("integer division or modulo by zero");
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return m;
        }
        if (fy == 0) type_error("float modulo");
        return float_mod(fx, fy);
      case BinOp::Pow:
        if (ints && y >= 0) {
          int64_t result = 1, base = x;
          for (int64_t e = y; e > 0; e >>= 1) {
            if (e & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
            if (e > 1) check_overflow(__builtin_mul_overflow(base, base, &base));
          }
          return result;
        }
        return std::pow(fx, fy);
    }
  }
  if (op == BinOp::Add) {
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > max_bytes) type_error("string too long");
      return Value(a.str() + b.str());
    }
    if (a.is_sequence() && a.kind() == b.kind()) {
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (a.is_string()) type_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_sequence())
      type_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    return unsupported();
  }
  if (op == BinOp::Mul) {
    const Value* seq = a.is_number() ? &b : &a;
    const Value* count = a.is_number() ? &a : &b;
    if ((seq->is_string() || seq->is_sequence()) && (count->is_int() || count->is_bool())) {
      const int64_t n = std::max<int64_t>(0, count->as_int());
      if (seq->is_string()) {
        if (static_cast<double>(seq->str().size()) * static_cast<double>(n) > static_cast<double>(max_bytes))
          type_error("string too long");
        std::string out;
        out.reserve(seq->str().size() * static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) out += seq->str();
        return Value(std::move(out));
      }
      if (static_cast<double>(seq->items().size()) * static_cast<double>(n) > static_cast<double>(max_bytes))
        type_error("list too long");
      List out;
      for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq->items().begin(), seq->items().end());
      return seq->kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (seq->is_string() || seq->is_sequence())
      type_error("can't multiply sequence by non-int of type '" + count->type_name() + "'");
  }
  if (op == BinOp::Mod && a.is_string()) return Value(percent_format(a.str(), b));
  return unsupported();
}

struct Interpreter::Nest {
  Interpreter& in;
  explicit Nest(Interpreter& interpreter) : in(interpreter) {
    if (in.depth_ >= kMaxDepth)
      throw RenderError("template nested more than " + std::to_string(kMaxDepth) +
                        " calls and expressions deep (runaway recursion?)");
    ++in.depth_;
  }
  ~Nest() { --in.depth_; }
  Nest(const Nest&) = delete;
  Nest& operator=(const Nest&) = delete;
};

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw RenderError("template exceeded the limit of " + std::to_string(limits_.max_steps) + " render steps");
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    throw RenderError("template output exceeded the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Interpreter::emit(std::string& out, std::string_view text) const {
  out.append(text);
  check_size(out.size());
}

std::string Interpreter::render(const Body& body, Dict globals) {
  auto top = std::make_shared<Scope>();
  for (auto& [k, v] : globals.entries) top->vars[k.to_str()] = std::move(v);
  std::string out;
  try {
    exec_body(body, top, out);
  } catch (const TemplateException& e) {
    top->vars.clear();
    throw Error(at(pos_, e.what()));
  } catch (const RenderError& e) {
    top->vars.clear();
    throw Error(at(pos_, e.what()));
  }
  top->vars.clear();  // breaks reference cycles through macros stored in the scope
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const Nest nest(*this);
  step();
  pos_ = s.pos;
  switch (s.type) {
    case StmtType::Output: emit(out, static_cast<const OutputStmt&>(s).text); break;
    case StmtType::Emit: {
      const Value v = eval(*static_cast<const EmitStmt&>(s).expr, scope);
      if (v.is_string()) emit(out, v.str());
      else emit(out, v.to_str());
      break;
    }
    case StmtType::If: {
      const auto& st = static_cast<const IfStmt&>(s);
      for (const auto& [cond, body] : st.branches)
        if (eval(*cond, scope).truthy()) return exec_body(body, scope, out);
      return exec_body(st.otherwise, scope, out);
    }
    case StmtType::For: return exec_for(static_cast<const ForStmt&>(s), scope, out);
    case StmtType::Set: {
      const auto& st = static_cast<const SetStmt&>(s);
      assign(st.target, eval(*st.value, scope), scope);
      break;
    }
    case StmtType::SetBlock: {
      const auto& st = static_cast<const SetBlockStmt&>(s);
      std::string text;
      exec_body(st.body, scope, text);
      assign(st.target, apply_filters(st.filters, Value(std::move(text)), scope), scope);
      break;
    }
    case StmtType::Macro: {
      const auto& st = static_cast<const MacroStmt&>(s);
      scope->vars[st.name] = make_macro(st.name, &st.params, &st.body, scope);
      break;
    }
    case StmtType::CallBlock: exec_call_block(static_cast<const CallBlockStmt&>(s), scope, out); break;
    case StmtType::FilterBlock: {
      const auto& st = static_cast<const FilterBlockStmt&>(s);
      std::string text;
      exec_body(st.body, std::make_shared<Scope>(Scope{{}, scope}), text);
      emit(out, apply_filters(st.filters, Value(std::move(text)), scope).to_str());
      break;
    }
    case StmtType::Break: return Flow::Break;
    case StmtType::Continue: return Flow::Continue;
    case StmtType::With: {
      const auto& st = static_cast<const WithStmt&>(s);
      auto inner = std::make_shared<Scope>(Scope{{}, scope});
      for (const auto& [target, expr] : st.assignments) assign(target, eval(*expr, scope), inner);
      return exec_body(st.body, inner, out);
    }
    case StmtType::Scope: return exec_body(static_cast<const ScopeStmt&>(s).body, scope, out);
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out) {
  if (s.recursive) throw RenderError("recursive for loops are not supported");
  List items = iterate(eval(*s.iter, scope));
  if (s.filter) {
    List kept;
    for (auto& item : items) {
      auto probe = std::make_shared<Scope>(Scope{{}, scope});
      assign(s.target, item, probe);
      if (eval(*s.filter, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.otherwise, std::make_shared<Scope>(Scope{{}, scope}), out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    step();
    auto iter_scope = std::make_shared<Scope>(Scope{{}, scope});
    const Value& item = items[static_cast<size_t>(k)];
    assign(s.target, item, iter_scope);
    Dict loop;
    loop.entries.reserve(14);
    auto put = [&](const char* key, Value v) { loop.entries.emplace_back(Value(key), std::move(v)); };
    put("index", k + 1);
    put("index0", k);
    put("revindex", n - k);
    put("revindex0", n - k - 1);
    put("first", k == 0);
    put("last", k == n - 1);
    put("length", n);
    put("depth", 1);
    put("depth0", 0);
    if (k > 0) put("previtem", items[static_cast<size_t>(k - 1)]);
    if (k + 1 < n) put("nextitem", items[static_cast<size_t>(k + 1)]);
    put("cycle", Value::callable("cycle", [k](Interpreter&, CallArgs& args) -> Value {
          if (args.positional.empty()) throw RenderError("no items for cycling given");
          return args.positional[static_cast<size_t>(k) % args.positional.size()];
        }));
    iter_scope->vars["loop"] = Value::dict(std::move(loop));
    const Flow f = exec_body(s.body, iter_scope, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interpreter::make_macro(std::string name, const MacroParams* params, const Body* body, ScopePtr closure) {
  std::weak_ptr<Scope> weak = closure;
  return Value::callable(name, [name, params, body, weak](Interpreter& in, CallArgs& args) -> Value {
    ScopePtr parent = weak.lock();
    if (!parent) throw RenderError("macro '" + name + "' called after its scope ended");
    in.step();
    auto scope = std::make_shared<Scope>(Scope{{}, parent});
    const auto& names = params->names;
    List varargs;
    if (args.positional.size() > names.size() && !params->uses_varargs)
      throw RenderError("macro '" + name + "' takes not more than " + std::to_string(names.size()) + " argument(s)");
    for (size_t k = 0; k < args.positional.size(); ++k) {
      if (k < names.size()) scope->vars[names[k]] = args.positional[k];
      else varargs.push_back(args.positional[k]);
    }
    Dict kwargs;
    for (auto& [key, v] : args.keyword) {
      bool found = false;
      for (size_t k = 0; k < names.size(); ++k)
        if (names[k] == key) {
          if (k < args.positional.size()) throw RenderError("macro '" + name + "' got multiple values for argument '" + key + "'");
          scope->vars[key] = v;
          found = true;
        }
      if (found) continue;
      if (key == "caller" ? !params->uses_caller : !params->uses_kwargs)
        throw RenderError("macro '" + name + "' takes no keyword argument '" + key + "'");
      if (key == "caller") scope->vars["caller"] = v;
      else kwargs.set(Value(key), v);
    }
    for (size_t k = 0; k < names.size(); ++k) {
      if (scope->vars.count(names[k])) continue;
      scope->vars[names[k]] = params->defaults[k] ? in.eval(*params->defaults[k], scope) : Value::undefined("'" + names[k] + "' is undefined");
    }
    scope->vars["varargs"] = Value::tuple(std::move(varargs));
    scope->vars["kwargs"] = Value::dict(std::move(kwargs));
    std::string out;
    const Pos saved = in.pos_;
    in.exec_body(*body, scope, out);
    in.pos_ = saved;
    return Value(std::move(out));
  });
}

void Interpreter::exec_call_block(const CallBlockStmt& s, const ScopePtr& scope, std::string& out) {
  CallArgs args = eval_args(s.call->args, scope);
  args.keyword.emplace_back("caller", make_macro("caller", &s.params, &s.body, scope));
  const Value fn = eval(*s.call->callee, scope);
  pos_ = s.pos;
  emit(out, call(fn, args).to_str());
}

void Interpreter::assign(const Target& t, const Value& v, const ScopePtr& scope) {
  switch (t.kind) {
    case Target::Kind::Name: scope->vars[t.name] = v; return;
    case Target::Kind::NsAttr: {
      const Value* ns = scope->find(t.name);
      if (!ns || ns->kind() != Kind::Namespace) throw RenderError("cannot assign attribute on non-namespace object");
      if (v.holds_namespace()) throw RenderError(kNamespaceInNamespace);
      ns->mutable_map().set(Value(t.attr), v);
      return;
    }
    case Target::Kind::Tuple: {
      const List items = iterate(v);
      if (items.size() != t.items.size())
        throw RenderError(items.size() > t.items.size()
                              ? "too many values to unpack (expected " + std::to_string(t.items.size()) + ")"
                              : "not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
                                    std::to_string(items.size()) + ")");
      for (size_t k = 0; k < items.size(); ++k) assign(t.items[k], items[k], scope);
      return;
    }
  }
}

Value Interpreter::apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v, const ScopePtr& scope) {
  for (const auto& f : filters) {
    CallArgs args = eval_args(f->args, scope);
    pos_ = f->pos;
    v = filter(f->name, v, args);
  }
  return v;
}

List Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
    case Kind::Tuple: return v.items();
    case Kind::Dict: {
      List keys;
      keys.reserve(v.map().size());
      for (const auto& [k, e] : v.map().entries) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      List chars;
      for (const auto& c : pystr::chars(v.str())) chars.emplace_back(c);
      return chars;
    }
    case Kind::Undefined:
      if (v.undefined_unsafe()) raise_undefined(v);
      return {};
    default: type_error("'" + v.type_name() + "' object is not iterable");
  }
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) {
  if (const Value* v = scope->find(name)) return *v;
  if (GlobalFn g = find_global(name))
    return Value::callable(name, [g](Interpreter& in, CallArgs& args) { return g(in, args); });
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  switch (find_method(obj, name)) {
    case MethodKind::Safe:
      return Value::callable(name, [obj, name](Interpreter& in, CallArgs& args) { return call_method(in, obj, name, args); });
    case MethodKind::Unsafe: return Value::undefined(unsafe_message(obj, name), true);
    case MethodKind::None: break;
  }
  if (obj.is_mapping()) {
    if (const Value* v = obj.map().find(std::string_view(name))) return *v;
  }
  return missing_attribute(obj, name);
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::Undefined: raise_undefined(obj);
    case Kind::Dict:
      if (const Value* v = obj.map().find(key)) return *v;
      break;
    case Kind::List:
    case Kind::Tuple:
    case Kind::String:
      if (key.is_int() || key.is_bool()) {
        int64_t k = key.as_int();
        if (obj.is_string()) {
          const std::u32string cps = pystr::decode(obj.str());
          const int64_t n = static_cast<int64_t>(cps.size());
          if (k < 0) k += n;
          if (k < 0 || k >= n) return missing_element(obj, key);
          return Value(pystr::encode(std::u32string(1, cps[static_cast<size_t>(k)])));
        }
        const int64_t n = static_cast<int64_t>(obj.items().size());
        if (k < 0) k += n;
        if (k < 0 || k >= n) return missing_element(obj, key);
        return obj.items()[static_cast<size_t>(k)];
      }
      break;
    default: break;
  }
  if (key.is_string()) {
    const MethodKind m = find_method(obj, key.str());
    if (m != MethodKind::None) return getattr(obj, key.str());
  }
  return missing_element(obj, key);
}

Value Interpreter::get_path(const Value& obj, const Value& path) {
  if (!path.is_string()) return getitem(obj, path);
  Value cur = obj;
  for (const auto& part : pystr::split(path.str(), ".", -1)) {
    const auto idx = to_int(Value(part));
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = numeric && idx ? getitem(cur, Value(*idx)) : getitem(cur, Value(part));
  }
  return cur;
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_callable()) return fn.fn().fn(*this, args);
  if (fn.is_undefined()) raise_undefined(fn);
  type_error("'" + fn.type_name() + "' object is not callable");
}

Value Interpreter::filter(const std::string& name, const Value& subject, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) throw RenderError("No filter named '" + name + "'.");
  step();
  return f(*this, subject, args);
}

bool Interpreter::test(const std::string& name, const Value& subject, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) throw RenderError("No test named '" + name + "'.");
  return t(*this, subject, args);
}

CallArgs Interpreter::eval_args(const Args& a, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(a.positional.size());
  for (const auto& e : a.positional) args.positional.push_back(eval(*e, scope));
  if (a.star)
    for (auto& v : iterate(eval(*a.star, scope))) args.positional.push_back(std::move(v));
  for (const auto& [k, e] : a.keyword) args.keyword.emplace_back(k, eval(*e, scope));
  if (a.double_star) {
    const Value d = eval(*a.double_star, scope);
    if (!d.is_mapping()) type_error("argument after ** must be a mapping, not " + d.type_name());
    for (const auto& [k, v] : d.map().entries) args.keyword.emplace_back(k.to_str(), v);
  }
  return args;
}

Value Interpreter::eval_call(const CallExpr& e, const ScopePtr& scope) {
  if (e.callee->type == ExprType::Attr) {
    // obj.method(...) on str, list and dict runs the method without building a bound callable.
    const auto& attr = static_cast<const AttrExpr&>(*e.callee);
    const Value obj = eval(*attr.object, scope);
    const MethodKind m = obj.is_undefined() ? MethodKind::None : find_method(obj, attr.name);
    if (m == MethodKind::Unsafe) {
      pos_ = e.pos;
      throw RenderError(unsafe_message(obj, attr.name));
    }
    CallArgs args = eval_args(e.args, scope);
    pos_ = e.pos;
    if (m == MethodKind::Safe) return call_method(*this, obj, attr.name, args);
    const Value fn = getattr(obj, attr.name);
    return call(fn, args);
  }
  const Value fn = eval(*e.callee, scope);
  CallArgs args = eval_args(e.args, scope);
  pos_ = e.pos;
  return call(fn, args);
}

Value Interpreter::eval_item(const ItemExpr& e, const ScopePtr& scope) {
  const Value obj = eval(*e.object, scope);
  if (e.index->type == ExprType::Slice) {
    const auto& s = static_cast<const SliceExpr&>(*e.index);
    const Value start = s.start ? eval(*s.start, scope) : Value::none();
    const Value stop = s.stop ? eval(*s.stop, scope) : Value::none();
    const Value step_v = s.step ? eval(*s.step, scope) : Value::none();
    pos_ = e.pos;
    return slice_value(obj, start, stop, step_v);
  }
  const Value key = eval(*e.index, scope);
  pos_ = e.pos;
  return getitem(obj, key);
}

bool Interpreter::eval_compare(const CompareExpr& e, const ScopePtr& scope) {
  Value left = eval(*e.first, scope);
  for (const auto& [op, expr] : e.rest) {
    Value right = eval(*expr, scope);
    pos_ = expr->pos;
    bool ok = false;
    switch (op) {
      case CmpOp::Eq: ok = equals(left, right); break;
      case CmpOp::Ne: ok = !equals(left, right); break;
      case CmpOp::In: ok = contains(right, left); break;
      case CmpOp::NotIn: ok = !contains(right, left); break;
      default: {
        if (left.is_undefined()) raise_undefined(left);
        if (right.is_undefined()) raise_undefined(right);
        const int c = compare(left, right);
        ok = op == CmpOp::Lt ? c < 0 : op == CmpOp::Le ? c <= 0 : op == CmpOp::Gt ? c > 0 : c >= 0;
      }
    }
    if (!ok) return false;
    left = std::move(right);
  }
  return true;
}

Value Interpreter::eval_binary(const BinaryExpr& e, const ScopePtr& scope) {
  Value left = eval(*e.left, scope);
  if (e.type == ExprType::And) return left.truthy() ? eval(*e.right, scope) : left;
  if (e.type == ExprType::Or) return left.truthy() ? left : eval(*e.right, scope);
  const Value right = eval(*e.right, scope);
  pos_ = e.pos;
  return arithmetic(e.op, left, right, limits_.max_output_bytes);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  const Nest nest(*this);
  step();
  pos_ = e.pos;
  switch (e.type) {
    case ExprType::Literal: return static_cast<const LiteralExpr&>(e).value;
    case ExprType::Name: return lookup(static_cast<const NameExpr&>(e).name, scope);
    case ExprType::List:
    case ExprType::Tuple: {
      List items;
      for (const auto& item : static_cast<const SeqExpr&>(e).items) items.push_back(eval(*item, scope));
      return e.type == ExprType::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprType::Dict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k, scope);
        d.set(std::move(key), eval(*v, scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprType::Attr: {
      const auto& a = static_cast<const AttrExpr&>(e);
      const Value obj = eval(*a.object, scope);
      pos_ = e.pos;
      return getattr(obj, a.name);
    }
    case ExprType::Item: return eval_item(static_cast<const ItemExpr&>(e), scope);
    case ExprType::Slice: throw RenderError("slice outside of a subscript");
    case ExprType::Call: return eval_call(static_cast<const CallExpr&>(e), scope);
    case ExprType::Filter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      const Value subject = eval(*f.subject, scope);
      CallArgs args = eval_args(f.args, scope);
      pos_ = e.pos;
      return filter(f.name, subject, args);
    }
    case ExprType::Test: {
      const auto& t = static_cast<const TestExpr&>(e);
      const Value subject = eval(*t.subject, scope);
      CallArgs args = eval_args(t.args, scope);
      pos_ = e.pos;
      return test(t.name, subject, args) != t.negated;
    }
    case ExprType::Neg:
    case ExprType::Pos: {
      const Value v = eval(*static_cast<const UnaryExpr&>(e).operand, scope);
      pos_ = e.pos;
      if (v.is_undefined()) raise_undefined(v);
      const bool neg = e.type == ExprType::Neg;
      if (v.is_float()) return neg ? -v.as_double() : v.as_double();
      if (v.is_int() || v.is_bool()) return neg ? -v.as_int() : v.as_int();
      type_error(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + v.type_name() + "'");
    }
    case ExprType::Not: return !eval(*static_cast<const UnaryExpr&>(e).operand, scope).truthy();
    case ExprType::Binary:
    case ExprType::And:
    case ExprType::Or: return eval_binary(static_cast<const BinaryExpr&>(e), scope);
    case ExprType::Concat: {
      std::string s;
      for (const auto& part : static_cast<const ConcatExpr&>(e).parts) {
        const Value v = eval(*part, scope);
        if (v.is_string()) s += v.str();
        else s += v.to_str();
        check_size(s.size());
      }
      return Value(std::move(s));
    }
    case ExprType::Compare: return eval_compare(static_cast<const CompareExpr&>(e), scope);
    case ExprType::Cond: {
      const auto& c = static_cast<const CondExpr&>(e);
      if (eval(*c.cond, scope).truthy()) return eval(*c.then, scope);
      if (c.otherwise) return eval(*c.otherwise, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.pos.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

}  // namespace ember::jinja
