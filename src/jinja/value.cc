#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "base/utf8.h"

namespace ember::jinja {

namespace {

struct UndefinedInfo {
  std::string hint;
  bool unsafe = false;
};

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

}  // namespace

const Value* CallArgs::kw(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  if (!hint.empty() || unsafe) v.ptr_ = std::make_shared<UndefinedInfo>(UndefinedInfo{std::move(hint), unsafe});
  return v;
}

Value::Value(std::string s) : kind_(Kind::String), ptr_(std::make_shared<std::string>(std::move(s))) {}

namespace {

// How deep a container of `parts` nests and whether it holds a namespace; throws past the bound.
struct Nesting {
  int depth = 1;
  bool holds_namespace = false;
  void add(const Value& part) {
    if (part.nesting() >= Value::kMaxNesting)
      throw RenderError("value nested more than " + std::to_string(Value::kMaxNesting) + " containers deep");
    depth = std::max(depth, part.nesting() + 1);
    holds_namespace = holds_namespace || part.holds_namespace();
  }
};

}  // namespace

Value Value::list(List items) {
  Nesting n;
  for (const Value& e : items) n.add(e);
  Value v;
  v.kind_ = Kind::List;
  v.nesting_ = static_cast<uint16_t>(n.depth);
  v.holds_namespace_ = n.holds_namespace;
  v.ptr_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::dict(Dict d) {
  Nesting n;
  for (const auto& [k, e] : d.entries) n.add(k), n.add(e);
  Value v;
  v.kind_ = Kind::Dict;
  v.nesting_ = static_cast<uint16_t>(n.depth);
  v.holds_namespace_ = n.holds_namespace;
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::namespace_(Dict d) {
  Value v = dict(std::move(d));
  if (v.holds_namespace_) throw RenderError(kNamespaceInNamespace);
  v.kind_ = Kind::Namespace;
  v.holds_namespace_ = true;
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.ptr_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

namespace {

// JSON -> Value; `depth` counts the containers around `j`, checked before descending further, as
// a deeper document would overflow the stack before Value::list / dict could refuse it.
Value json_value(const nlohmann::ordered_json& j, int depth) {
  if (j.is_structured() && depth >= Value::kMaxNesting)
    throw RenderError("JSON value nested more than " + std::to_string(Value::kMaxNesting) + " containers deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(json_value(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.entries.emplace_back(Value(k), json_value(e, depth + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::undefined();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return json_value(j, 0); }

double Value::as_double() const {
  switch (kind_) {
    case Kind::Float: return num_.f;
    case Kind::Int: return static_cast<double>(num_.i);
    case Kind::Bool: return num_.b ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const std::string& Value::undefined_hint() const {
  return ptr_ ? static_cast<const UndefinedInfo*>(ptr_.get())->hint : empty_string();
}

bool Value::undefined_unsafe() const {
  return ptr_ && static_cast<const UndefinedInfo*>(ptr_.get())->unsafe;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return num_.b;
    case Kind::Int: return num_.i != 0;
    case Kind::Float: return num_.f != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List:
    case Kind::Tuple: return !items().empty();
    case Kind::Dict: return map().size() != 0;
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = false;
  size_t p = 0;
  if (sci[0] == '-') negative = true, p = 1;
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t k = p; k < e_pos; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exp10 = std::stoi(sci.substr(e_pos + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int e = decpt - 1;
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
  return out + ebuf;
}

namespace {

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp < 0x7f) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

void repr_into(const Value& v, std::string& out);

void repr_items(const List& items, std::string& out) {
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += ", ";
    repr_into(items[k], out);
  }
}

void repr_into(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Kind::String: out += repr_string(v.str()); return;
    case Kind::List:
      out += '[';
      repr_items(v.items(), out);
      out += ']';
      return;
    case Kind::Tuple:
      out += '(';
      repr_items(v.items(), out);
      if (v.items().size() == 1) out += ',';
      out += ')';
      return;
    case Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.map().entries) {
        if (!first) out += ", ";
        first = false;
        repr_into(k, out);
        out += ": ";
        repr_into(e, out);
      }
      out += '}';
      return;
    }
    default: out += v.to_str();
  }
}

}  // namespace

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const char32_t cp = utf8::decode(s, pos);
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!is_printable(cp)) {
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  out += quote;
  return out;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return num_.b ? "True" : "False";
    case Kind::Int: return std::to_string(num_.i);
    case Kind::Float: return format_float(num_.f);
    case Kind::String: return str();
    case Kind::Namespace: return "<Namespace>";
    case Kind::Callable: return "<function " + fn().name + ">";
    default: {
      std::string out;
      repr_into(*this, out);
      return out;
    }
  }
}

std::string Value::repr() const {
  if (kind_ == Kind::Undefined) return "Undefined";
  std::string out;
  repr_into(*this, out);
  return out;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

bool Value::same_object(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Bool: return num_.b == o.num_.b;
    case Kind::Int: return num_.i == o.num_.i;
    case Kind::Float: return num_.f == o.num_.f;
    default: return ptr_ == o.ptr_;
  }
}

nlohmann::ordered_json Value::to_json() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return nullptr;
    case Kind::Bool: return num_.b;
    case Kind::Int: return num_.i;
    case Kind::Float: return num_.f;
    case Kind::String: return str();
    case Kind::List:
    case Kind::Tuple: {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& e : items()) arr.push_back(e.to_json());
      return arr;
    }
    case Kind::Dict:
    case Kind::Namespace: {
      auto obj = nlohmann::ordered_json::object();
      for (const auto& [k, e] : map().entries) obj[k.to_str()] = e.to_json();
      return obj;
    }
    case Kind::Callable: return to_str();
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List:
    case Kind::Tuple: {
      const List& x = a.items();
      const List& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t k = 0; k < x.size(); ++k)
        if (!equals(x[k], y[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.map().size() != b.map().size()) return false;
      for (const auto& [k, v] : a.map().entries) {
        const Value* other = b.map().find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind() == b.kind() && a.is_sequence()) {
    const List& x = a.items();
    const List& y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return compare(x[k], y[k]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw RenderError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                    b.type_name() + "'");
}

namespace {

void json_string(std::string_view s, std::string& out) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::String: return k.str();
    case Kind::Bool: return k.as_bool() ? "true" : "false";
    case Kind::None: return "null";
    case Kind::Int:
    case Kind::Float: return k.to_str();
    default: throw RenderError("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

struct JsonWriter {
  int indent;
  bool sort_keys;
  std::string_view item_sep, key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  }

  void write(const Value& v, int level) {
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out += std::to_string(v.as_int()); return;
      case Kind::Float: {
        const double d = v.as_double();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += format_float(d);
        return;
      }
      case Kind::String: json_string(v.str(), out); return;
      case Kind::List:
      case Kind::Tuple: {
        const List& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += item_sep;
          if (indent >= 0) newline(level + 1);
          write(items[k], level + 1);
        }
        if (indent >= 0) newline(level);
        out += ']';
        return;
      }
      case Kind::Dict: {
        if (v.map().size() == 0) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, e] : v.map().entries) entries.emplace_back(json_key(k), &e);
        if (sort_keys)
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& x, const auto& y) { return x.first < y.first; });
        out += '{';
        for (size_t k = 0; k < entries.size(); ++k) {
          if (k) out += item_sep;
          if (indent >= 0) newline(level + 1);
          json_string(entries[k].first, out);
          out += key_sep;
          write(*entries[k].second, level + 1);
        }
        if (indent >= 0) newline(level);
        out += '}';
        return;
      }
      default: throw RenderError("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json_text(const Value& v, int indent, bool sort_keys, std::string_view item_sep,
                         std::string_view key_sep) {
  JsonWriter w{indent, sort_keys, item_sep, key_sep, {}};
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace ember::jinja
