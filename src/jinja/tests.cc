// Jinja2's tests (`x is defined`, `x is divisibleby 3`, ...).
#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ember::jinja {

namespace {

const Value& arg(const CallArgs& args, const char* test) {
  const auto a = bind_args(args, {"other"}, test);
  if (!a[0]) throw RenderError(std::string(test) + "() missing 1 required positional argument");
  return *a[0];
}

int cmp(const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  return compare(a, b);
}

int64_t int_value(const Value& v) {
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) throw RenderError("unsupported operand type(s) for %: '" + v.type_name() + "' and 'int'");
  return v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int();
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::Dict; }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_sequence() || v.kind() == Kind::Dict || v.is_undefined();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_sequence() || v.kind() == Kind::Dict || v.is_undefined();
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable() || v.is_undefined(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return int_value(v) % 2 != 0; }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return int_value(v) % 2 == 0; }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& args) {
  const int64_t d = int_value(arg(args, "divisibleby"));
  if (d == 0) throw RenderError("integer division or modulo by zero");
  return int_value(v) % d == 0;
}
bool t_eq(Interpreter&, const Value& v, CallArgs& args) { return equals(v, arg(args, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& args) { return !equals(v, arg(args, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& args) { return cmp(v, arg(args, "lt")) < 0; }
bool t_le(Interpreter&, const Value& v, CallArgs& args) { return cmp(v, arg(args, "le")) <= 0; }
bool t_gt(Interpreter&, const Value& v, CallArgs& args) { return cmp(v, arg(args, "gt")) > 0; }
bool t_ge(Interpreter&, const Value& v, CallArgs& args) { return cmp(v, arg(args, "ge")) >= 0; }
bool t_in(Interpreter&, const Value& v, CallArgs& args) { return contains(arg(args, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& args) { return v.same_object(arg(args, "sameas")); }
bool t_lower(Interpreter&, const Value& v, CallArgs&) { return pystr::predicate("lower", v.to_str()).value(); }
bool t_upper(Interpreter&, const Value& v, CallArgs&) { return pystr::predicate("upper", v.to_str()).value(); }
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

}  // namespace

TestFn find_test(std::string_view name) {
  static constexpr std::pair<std::string_view, TestFn> table[] = {
      {"defined", t_defined},   {"undefined", t_undefined},   {"none", t_none},       {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},           {"integer", t_integer}, {"float", t_float},
      {"number", t_number},     {"string", t_string},         {"mapping", t_mapping}, {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},     {"escaped", t_escaped}, {"odd", t_odd},
      {"even", t_even},         {"divisibleby", t_divisibleby}, {"eq", t_eq},         {"equalto", t_eq},
      {"==", t_eq},             {"ne", t_ne},                 {"!=", t_ne},           {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},                  {"le", t_le},           {"<=", t_le},
      {"gt", t_gt},             {"greaterthan", t_gt},        {">", t_gt},            {"ge", t_ge},
      {">=", t_ge},             {"in", t_in},                 {"sameas", t_sameas},   {"lower", t_lower},
      {"upper", t_upper},       {"filter", t_filter},         {"test", t_test},
  };
  for (const auto& [n, f] : table)
    if (n == name) return f;
  return nullptr;
}

}  // namespace ember::jinja
