// Jinja2's builtin filters, with tojson as Hugging Face transformers defines it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/utf8.h"
#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ember::jinja {

namespace {

using Bound = std::vector<const Value*>;

std::string soft_str(const Value& v) { return v.is_string() ? v.str() : v.to_str(); }

bool flag(const Value* v, bool dflt = false) { return v ? v->truthy() : dflt; }

int64_t int_param(const Value* v, int64_t dflt, const char* what) {
  if (!v || v->is_none()) return dflt;
  if (v->is_int() || v->is_bool()) return v->as_int();
  if (auto i = to_int(*v)) return *i;
  throw RenderError(std::string("'") + what + "' must be an integer, not " + v->type_name());
}

Value lowered(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(pystr::lower(v.str())) : v;
}

// The item itself, or its attribute path when `attribute` is given (Jinja2's make_attrgetter).
Value key_of(Interpreter& in, const Value& item, const Value* attribute, const Value* dflt = nullptr) {
  if (!attribute || attribute->is_none()) return item;
  Value v = in.get_path(item, *attribute);
  if (v.is_undefined() && dflt) return *dflt;
  return v;
}

void sort_values(List& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? compare(keys[b], keys[a]) < 0 : compare(keys[a], keys[b]) < 0;
  });
  List sorted;
  sorted.reserve(items.size());
  for (size_t k : order) sorted.push_back(items[k]);
  items = std::move(sorted);
}

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "abs");
  if (v.is_float()) return std::fabs(v.as_double());
  if (v.is_int() || v.is_bool()) return v.as_int() < 0 ? -v.as_int() : v.as_int();
  throw RenderError("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"name"}, "attr");
  if (!a[0]) throw RenderError("attr() missing 1 required positional argument: 'name'");
  return in.getattr(v, soft_str(*a[0]));
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"linecount", "fill_with"}, "batch");
  const int64_t n = int_param(a[0], 0, "linecount");
  if (n <= 0) throw RenderError("batch() linecount must be positive");
  List out, cur;
  for (const auto& item : in.iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (a[1] && !a[1]->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*a[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(pystr::capitalize(soft_str(v))); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(pystr::upper(soft_str(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(pystr::lower(soft_str(v))); }
Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(soft_str(v)); }
Value f_pprint(Interpreter&, const Value& v, CallArgs&) { return Value(v.repr()); }

Value f_center(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"width"}, "center");
  return Value(pystr::pad(soft_str(v), int_param(a[0], 80, "width"), '^'));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(pystr::length(v.str()));
    case Kind::List:
    case Kind::Tuple: return static_cast<int64_t>(v.items().size());
    case Kind::Dict: return static_cast<int64_t>(v.map().size());
    default: throw RenderError("object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"default_value", "boolean"}, "default");
  if (v.is_undefined() || (flag(a[1]) && !v.truthy())) return a[0] ? *a[0] : Value(std::string());
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!v.is_mapping()) throw RenderError("dictsort() requires a mapping");
  const std::string by = a[1] ? soft_str(*a[1]) : "key";
  if (by != "key" && by != "value") throw RenderError("You can only sort by either \"key\" or \"value\"");
  List items;
  std::vector<Value> keys;
  for (const auto& [k, e] : v.map().entries) {
    items.push_back(Value::tuple({k, e}));
    keys.push_back(lowered(by == "key" ? k : e, flag(a[0])));
  }
  sort_values(items, keys, flag(a[2]));
  return Value::list(std::move(items));
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_sequence()) return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items()[0];
  const List items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
}

Value f_last(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_sequence()) return v.items().empty() ? Value::undefined("No last item, sequence was empty.") : v.items().back();
  const List items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"default"}, "float");
  if (auto d = to_float(v)) return *d;
  return a[0] ? *a[0] : Value(0.0);
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"default", "base"}, "int");
  const int base = static_cast<int>(int_param(a[1], 10, "base"));
  if (v.is_string()) {
    if (auto i = to_int(v, base)) return *i;
    if (auto d = to_float(v)) {
      if (auto i = to_int(Value(*d))) return *i;
    }
  } else if (auto i = to_int(v)) {
    return *i;
  }
  return a[0] ? *a[0] : Value(0);
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty())
    throw RenderError("can't handle positional and keyword arguments at the same time");
  if (!args.keyword.empty()) {
    Dict d;
    for (const auto& [k, e] : args.keyword) d.set(Value(k), e);
    return Value(percent_format(soft_str(v), Value::dict(std::move(d))));
  }
  return Value(percent_format(soft_str(v), Value::tuple(args.positional)));
}

Value f_groupby(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"attribute", "default", "case_sensitive"}, "groupby");
  if (!a[0]) throw RenderError("groupby() missing 1 required positional argument: 'attribute'");
  List items = in.iterate(v);
  std::vector<Value> keys;
  for (const auto& item : items) keys.push_back(lowered(key_of(in, item, a[0], a[1]), flag(a[2])));
  sort_values(items, keys, false);
  keys.clear();
  for (const auto& item : items) keys.push_back(lowered(key_of(in, item, a[0], a[1]), flag(a[2])));
  List out;
  for (size_t k = 0; k < items.size();) {
    List group;
    size_t e = k;
    while (e < items.size() && equals(keys[e], keys[k])) group.push_back(items[e++]);
    const Value grouper = flag(a[2]) ? keys[k] : key_of(in, items[k], a[0], a[1]);
    out.push_back(Value::tuple({grouper, Value::list(std::move(group))}));
    k = e;
  }
  return Value::list(std::move(out));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"width", "first", "blank"}, "indent");
  const std::string ind = a[0] && a[0]->is_string() ? a[0]->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, int_param(a[0], 4, "width"))), ' ');
  const std::string s = soft_str(v) + "\n";
  const auto lines = pystr::splitlines(s, false);
  std::string rv;
  if (flag(a[2])) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? lines[k] : ind + lines[k]);
  }
  if (flag(a[1])) rv = ind + rv;
  return Value(std::move(rv));
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) throw RenderError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, e] : v.map().entries) out.push_back(Value::tuple({k, e}));
  return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"d", "attribute"}, "join");
  const std::string sep = a[0] ? soft_str(*a[0]) : "";
  std::string out;
  bool first = true;
  for (const auto& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(key_of(in, item, a[1]));
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_list(Interpreter& in, const Value& v, CallArgs&) { return Value::list(in.iterate(v)); }

Value f_map(Interpreter& in, const Value& v, CallArgs& args) {
  List out;
  const Value* attribute = args.kw("attribute");
  if (attribute) {
    const Value* dflt = args.kw("default");
    for (const auto& item : in.iterate(v)) out.push_back(key_of(in, item, attribute, dflt));
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) throw RenderError("map requires a filter argument");
  const std::string name = soft_str(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const auto& item : in.iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.filter(name, item, copy));
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  const Bound a = bind_args(args, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
  const List items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = lowered(key_of(in, items[0], a[1]), flag(a[0]));
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = lowered(key_of(in, items[k], a[1]), flag(a[0]));
    const int c = compare(key, best_key);
    if (want_max ? c > 0 : c < 0) best = k, best_key = std::move(key);
  }
  return items[best];
}
Value f_max(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, false); }

Value select_impl(Interpreter& in, const Value& v, CallArgs& args, bool by_attr, bool keep) {
  List out;
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (args.positional.empty()) throw RenderError("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) test = soft_str(args.positional[next++]);
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
  test_args.keyword = args.keyword;
  for (const auto& item : in.iterate(v)) {
    const Value subject = by_attr ? in.get_path(item, attribute) : item;
    bool ok;
    if (test.empty()) {
      ok = subject.truthy();
    } else {
      CallArgs copy = test_args;
      ok = in.test(test, subject, copy);
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& args) { return select_impl(in, v, args, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& args) { return select_impl(in, v, args, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& args) { return select_impl(in, v, args, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& args) { return select_impl(in, v, args, true, false); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"old", "new", "count"}, "replace");
  if (!a[0] || !a[1]) throw RenderError("replace() missing required arguments");
  std::string out = pystr::replace(soft_str(v), soft_str(*a[0]), soft_str(*a[1]), int_param(a[2], -1, "count"));
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string u = pystr::decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value(pystr::encode(u));
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Python's round(x, n): correctly rounded, ties to even.
double py_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits == 0) return std::nearbyint(x);
  if (digits > 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / p) * p;
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"precision", "method"}, "round");
  const int64_t precision = int_param(a[0], 0, "precision");
  const std::string method = a[1] ? soft_str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw RenderError("method must be common, ceil or floor");
  if (!v.is_number()) throw RenderError("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float() && precision >= 0) return v.as_int();
    return py_round(v.as_double(), precision);
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * p;
  return (method == "ceil" ? std::ceil(x) : std::floor(x)) / p;
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return Value(soft_str(v)); }

Value f_sort(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"reverse", "case_sensitive", "attribute"}, "sort");
  List items = in.iterate(v);
  std::vector<Value> keys;
  for (const auto& item : items) keys.push_back(lowered(key_of(in, item, a[2]), flag(a[1])));
  sort_values(items, keys, flag(a[0]));
  return Value::list(std::move(items));
}

Value f_striptags(Interpreter&, const Value& v, CallArgs&) {
  std::string s = soft_str(v), text;
  for (size_t k = 0; k < s.size();) {
    if (s.compare(k, 4, "<!--") == 0) {
      const size_t e = s.find("-->", k);
      if (e != std::string::npos) {
        k = e + 3;
        continue;
      }
    }
    if (s[k] == '<') {
      const size_t e = s.find('>', k);
      if (e != std::string::npos) {
        k = e + 1;
        continue;
      }
    }
    text += s[k++];
  }
  std::string out;
  for (const auto& w : pystr::split(text, std::nullopt, -1)) out += (out.empty() ? "" : " ") + w;
  static constexpr std::pair<std::string_view, std::string_view> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities) out = pystr::replace(out, from, to, -1);
  return Value(std::move(out));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"attribute", "start"}, "sum");
  Value total = a[1] ? *a[1] : Value(0);
  for (const auto& item : in.iterate(v)) total = arithmetic(BinOp::Add, total, key_of(in, item, a[0]), SIZE_MAX);
  return total;
}

Value f_title(Interpreter&, const Value& v, CallArgs&) {
  // Jinja2 capitalises the first letter after whitespace, '-', '(', '{', '[' and '<'.
  const std::u32string u = pystr::decode(soft_str(v));
  std::u32string out;
  bool word_start = true;
  for (char32_t c : u) {
    const bool sep = pystr::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string piece = pystr::encode(std::u32string(1, c));
    out += pystr::decode(sep ? piece : word_start ? pystr::upper(piece) : pystr::lower(piece));
    word_start = sep;
  }
  return Value(pystr::encode(out));
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  int indent = -1;
  if (a[1] && !a[1]->is_none()) indent = static_cast<int>(int_param(a[1], 0, "indent"));
  std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_sequence() || a[2]->items().size() != 2) throw RenderError("separators must be a pair of strings");
    item_sep = soft_str(a[2]->items()[0]);
    key_sep = soft_str(a[2]->items()[1]);
  }
  std::string out = to_json_text(v, indent, flag(a[3]), item_sep, key_sep);
  if (!flag(a[0])) return Value(std::move(out));
  std::string ascii;
  size_t pos = 0;
  while (pos < out.size()) {
    const char32_t c = utf8::decode(out, pos);
    char buf[16];
    if (c < 0x80) {
      ascii += static_cast<char>(c);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      ascii += buf;
    } else {
      const unsigned x = static_cast<unsigned>(c) - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
      ascii += buf;
    }
  }
  return Value(std::move(ascii));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"chars"}, "trim");
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) chars = soft_str(*a[0]);
  return Value(pystr::strip(soft_str(v), chars, true, true));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"length", "killwords", "end", "leeway"}, "truncate");
  const std::string s = soft_str(v);
  const int64_t length = int_param(a[0], 255, "length");
  const std::string end = a[2] ? soft_str(*a[2]) : "...";
  const int64_t leeway = int_param(a[3], 5, "leeway");
  if (length < static_cast<int64_t>(pystr::length(end)))
    throw RenderError("expected length >= " + std::to_string(pystr::length(end)) + ", got " + std::to_string(length));
  if (leeway < 0) throw RenderError("expected leeway >= 0, got " + std::to_string(leeway));
  const std::u32string u = pystr::decode(s);
  const int64_t n = static_cast<int64_t>(u.size());
  if (n <= length + leeway) return Value(s);
  const int64_t keep = std::max<int64_t>(0, length - static_cast<int64_t>(pystr::length(end)));
  const std::string head = pystr::encode(std::u32string_view(u).substr(0, static_cast<size_t>(keep)));
  if (flag(a[1])) return Value(head + end);
  return Value(pystr::rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& args) {
  const Bound a = bind_args(args, {"case_sensitive", "attribute"}, "unique");
  List out;
  std::vector<Value> seen;
  for (const auto& item : in.iterate(v)) {
    Value key = lowered(key_of(in, item, a[1]), flag(a[0]));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : pystr::decode(soft_str(v))) {
    const bool w = c == '_' || pystr::predicate("alnum", pystr::encode(std::u32string(1, c))).value();
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static constexpr std::pair<std::string_view, FilterFn> table[] = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},       {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},      {"length", f_length},     {"d", f_default},
      {"default", f_default},   {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},
      {"forceescape", f_escape}, {"first", f_first},      {"last", f_last},         {"float", f_float},
      {"int", f_int},           {"format", f_format},     {"groupby", f_groupby},   {"indent", f_indent},
      {"items", f_items},       {"join", f_join},         {"list", f_list},         {"lower", f_lower},
      {"upper", f_upper},       {"map", f_map},           {"max", f_max},           {"min", f_min},
      {"pprint", f_pprint},     {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"select", f_select},
      {"selectattr", f_selectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round},
      {"safe", f_safe},         {"sort", f_sort},         {"string", f_string},     {"striptags", f_striptags},
      {"sum", f_sum},           {"title", f_title},       {"tojson", f_tojson},     {"trim", f_trim},
      {"truncate", f_truncate}, {"unique", f_unique},     {"wordcount", f_wordcount},
  };
  for (const auto& [n, f] : table)
    if (n == name) return f;
  return nullptr;
}

}  // namespace ember::jinja
