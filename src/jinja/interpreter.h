#pragma once
// Walks the syntax tree and writes the output, with Jinja2's scoping (a fresh scope per loop
// iteration and per macro call, namespace() for state that must outlive them), the immutable
// sandbox's attribute rules and bounds on steps and output size.
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace ember::jinja {

struct Limits {
  uint64_t max_steps;
  size_t max_output_bytes;
  std::optional<std::time_t> now;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits) : limits_(limits) {}

  // Renders `body` with `globals` as the template's top-level variables.
  std::string render(const Body& body, Dict globals);

  // Services for filters, tests and methods.
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // `attribute=` arguments of filters: "a.b.0" walks attributes and indices.
  Value get_path(const Value& obj, const Value& path);
  Value call(const Value& fn, CallArgs& args);
  // The items a for loop over `v` visits (dict: keys, str: characters).
  List iterate(const Value& v);
  Value filter(const std::string& name, const Value& subject, CallArgs& args);
  bool test(const std::string& name, const Value& subject, CallArgs& args);
  void step();
  // Checks that a string the template builds stays within the output bound.
  void check_size(size_t bytes) const;
  std::time_t now() const { return limits_.now ? *limits_.now : std::time(nullptr); }

 private:
  enum class Flow { Normal, Break, Continue };

  // Statements, expressions and macro calls being evaluated at once: a bound on the stack a
  // recursive macro can take (Python stops such a template with a RecursionError).
  static constexpr int kMaxDepth = 1000;
  struct Nest;

  Limits limits_;
  uint64_t steps_ = 0;
  int depth_ = 0;
  Pos pos_;

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out);
  void exec_macro(const MacroStmt& s, const ScopePtr& scope);
  void exec_call_block(const CallBlockStmt& s, const ScopePtr& scope, std::string& out);
  Value make_macro(std::string name, const MacroParams* params, const Body* body, ScopePtr closure);
  void assign(const Target& t, const Value& v, const ScopePtr& scope);
  Value apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v, const ScopePtr& scope);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_call(const CallExpr& e, const ScopePtr& scope);
  Value eval_binary(const BinaryExpr& e, const ScopePtr& scope);
  bool eval_compare(const CompareExpr& e, const ScopePtr& scope);
  Value eval_item(const ItemExpr& e, const ScopePtr& scope);
  CallArgs eval_args(const Args& a, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope);
  void emit(std::string& out, std::string_view text) const;
};

// Python's `in` operator.
bool contains(const Value& container, const Value& item);
// Python's binary arithmetic for + - * / // % **.
Value arithmetic(BinOp op, const Value& a, const Value& b, size_t max_bytes);
// Raises the UndefinedError (or sandbox SecurityError) that using `v` as a value would raise.
[[noreturn]] void raise_undefined(const Value& v);

}  // namespace ember::jinja
