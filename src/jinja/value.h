#pragma once
// The value model of the template engine: Python's types as Jinja2 sees them (None, bool, int,
// float, str, list, tuple, dict, callables, namespace) plus Jinja2's Undefined. Values are cheap
// to copy: everything larger than a number is shared and never mutated after construction,
// except namespace() objects, which templates assign to on purpose.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::jinja {

// A failure while rendering; the interpreter adds the template position before it leaves the
// engine as ember::Error.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised by raise_exception(msg): the message is passed on unchanged.
class TemplateException : public RenderError {
 public:
  using RenderError::RenderError;
};

class Value;
class Interpreter;
using List = std::vector<Value>;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Looks up a keyword argument (nullptr when absent).
  const Value* kw(std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

struct Dict;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Callable };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint = {}, bool unsafe = false);
  static Value none() { Value v; v.kind_ = Kind::None; return v; }
  Value(bool b) : kind_(Kind::Bool) { num_.b = b; }  // NOLINT: implicit like Python literals
  Value(int v) : Value(static_cast<int64_t>(v)) {}   // NOLINT
  Value(int64_t v) : kind_(Kind::Int) { num_.i = v; }  // NOLINT
  Value(double v) : kind_(Kind::Float) { num_.f = v; }  // NOLINT
  Value(std::string s);  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(Dict d);
  static Value namespace_(Dict d);
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return num_.b; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (num_.b ? 1 : 0) : num_.i; }
  double as_double() const;  // any number
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const List& items() const { return *static_cast<const List*>(ptr_.get()); }
  const Dict& map() const { return *static_cast<const Dict*>(ptr_.get()); }
  Dict& mutable_map() const { return *static_cast<Dict*>(ptr_.get()); }  // namespace only
  const Callable& fn() const { return *static_cast<const Callable*>(ptr_.get()); }
  // Undefined: the message an operation on it raises ("'x' is undefined"), and whether it stands
  // for an attribute the sandbox refused.
  const std::string& undefined_hint() const;
  bool undefined_unsafe() const;

  bool truthy() const;
  std::string to_str() const;  // Python str()
  std::string repr() const;    // Python repr()
  std::string type_name() const;  // Python type name: "dict", "str", "NoneType", ...
  bool same_object(const Value& o) const;  // Python `is`
  nlohmann::ordered_json to_json() const;

  // Containers nest at most kMaxNesting deep (list, tuple and dict builders throw RenderError past
  // it), so printing, comparing or freeing a value cannot run out of stack. A namespace() may not
  // hold another one: that would let it contain itself (a cycle never freed) or chain without bound.
  static constexpr int kMaxNesting = 512;
  int nesting() const { return nesting_; }  // 0 for a scalar
  bool holds_namespace() const { return holds_namespace_; }

 private:
  Kind kind_ = Kind::Undefined;
  bool holds_namespace_ = false;
  uint16_t nesting_ = 0;
  union {
    bool b;
    int64_t i;
    double f;
  } num_{};
  std::shared_ptr<void> ptr_;
};

// An insertion-ordered dict with Python key equality (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
  size_t size() const { return entries.size(); }
};

inline constexpr const char* kNamespaceInNamespace = "a namespace() cannot hold another namespace";

// Python ==, and ordering (<0, 0, >0; throws RenderError for unorderable types like str < int).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// Python repr() of a float ("1.0", "0.1", "1e+16", "inf").
std::string format_float(double d);
// Python repr() of a str.
std::string repr_string(std::string_view s);
// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys); indent < 0 means None.
std::string to_json_text(const Value& v, int indent, bool sort_keys,
                         std::string_view item_sep = ", ", std::string_view key_sep = ": ");

}  // namespace ember::jinja
