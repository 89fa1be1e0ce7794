// Methods of str, dict, list and tuple values as Python defines them; the immutable sandbox
// refuses the ones that modify a dict or list.
#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ember::jinja {

namespace {

constexpr std::string_view kStrMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind", "index", "rindex", "count", "join",
    "format", "center", "ljust", "rjust", "zfill", "partition", "rpartition", "removeprefix", "removesuffix",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "istitle", "isnumeric", "isdecimal", "isascii",
    "expandtabs", "encode", "format_map", "isidentifier", "isprintable", "maketrans", "translate"};
constexpr std::string_view kDictSafe[] = {"items", "keys", "values", "get", "copy"};
constexpr std::string_view kDictUnsafe[] = {"pop", "popitem", "setdefault", "update", "clear"};
constexpr std::string_view kListSafe[] = {"index", "count", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool in(const std::string_view (&table)[N], std::string_view name) {
  return std::find(std::begin(table), std::end(table), name) != std::end(table);
}

std::string str_arg(const Value* v, const char* method) {
  if (!v || !v->is_string())
    throw RenderError(std::string(method) + "() argument must be str, not " + (v ? v->type_name() : "NoneType"));
  return v->str();
}

std::optional<std::string> opt_str(const Value* v, const char* method) {
  if (!v || v->is_none()) return std::nullopt;
  return str_arg(v, method);
}

int64_t int_or(const Value* v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    throw RenderError("'" + v->type_name() + "' object cannot be interpreted as an integer");
  return v->as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  List out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

// startswith/endswith with an optional tuple of candidates.
bool affix_match(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string t = str_arg(&a, prefix ? "startswith" : "endswith");
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (arg.kind() == Kind::Tuple) {
    for (const auto& a : arg.items())
      if (one(a)) return true;
    return false;
  }
  return one(arg);
}

// Applies Python's start/end arguments of find/count/startswith to a string.
std::string window(const std::string& s, const Value* start, const Value* end) {
  if ((!start || start->is_none()) && (!end || end->is_none())) return s;
  const std::u32string u = pystr::decode(s);
  const int64_t n = static_cast<int64_t>(u.size());
  auto clamp = [n](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
  const int64_t b = clamp(int_or(start, 0)), e = clamp(int_or(end, n));
  if (b >= e) return std::string();
  return pystr::encode(std::u32string_view(u).substr(static_cast<size_t>(b), static_cast<size_t>(e - b)));
}

Value str_method(Interpreter& in, const std::string& s, std::string_view name, CallArgs& args) {
  auto bind = [&](std::initializer_list<std::string_view> names) { return bind_args(args, names, name); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind({"chars"});
    return Value(pystr::strip(s, opt_str(a[0], "strip"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind({"sep", "maxsplit"});
    const auto sep = opt_str(a[0], "split");
    if (sep && sep->empty()) throw RenderError("empty separator");
    const int64_t maxsplit = int_or(a[1], -1);
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit) : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    const auto a = bind({"keepends"});
    return string_list(pystr::splitlines(s, a[0] && a[0]->truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind({"prefix", "start", "end"});
    if (!a[0]) throw RenderError(std::string(name) + "() takes at least 1 argument (0 given)");
    return affix_match(window(s, a[1], a[2]), *a[0], name == "startswith");
  }
  if (name == "upper") return Value(pystr::upper(s));
  if (name == "lower" || name == "casefold") return Value(pystr::lower(s));
  if (name == "title") return Value(pystr::title(s));
  if (name == "capitalize") return Value(pystr::capitalize(s));
  if (name == "swapcase") return Value(pystr::swapcase(s));
  if (name == "replace") {
    const auto a = bind({"old", "new", "count"});
    const std::string repl = pystr::replace(s, str_arg(a[0], "replace"), str_arg(a[1], "replace"), int_or(a[2], -1));
    in.check_size(repl.size());
    return Value(repl);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const auto a = bind({"sub", "start", "end"});
    const std::string sub = str_arg(a[0], std::string(name).c_str());
    const std::string w = window(s, a[1], a[2]);
    if (name == "count") return pystr::count(w, sub);
    int64_t r = pystr::find(w, sub, name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) throw RenderError("substring not found");
    if (r >= 0 && a[1] && !a[1]->is_none()) {
      const int64_t n = static_cast<int64_t>(pystr::length(s));
      int64_t b = a[1]->as_int();
      r += b < 0 ? std::max<int64_t>(0, b + n) : std::min(b, n);
    }
    return r;
  }
  if (name == "join") {
    const auto a = bind({"iterable"});
    if (!a[0]) throw RenderError("join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const auto& item : in.iterate(*a[0])) {
      if (!item.is_string()) throw RenderError("sequence item: expected str instance, " + item.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += item.str();
      in.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(brace_format(s, args));
  if (name == "format_map") {
    const auto a = bind({"mapping"});
    CallArgs kw;
    if (a[0] && a[0]->is_mapping())
      for (const auto& [k, v] : a[0]->map().entries) kw.keyword.emplace_back(k.to_str(), v);
    return Value(brace_format(s, kw));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const auto a = bind({"width", "fillchar"});
    const std::string fill = a[1] ? str_arg(a[1], "center") : " ";
    if (pystr::length(fill) != 1) throw RenderError("The fill character must be exactly one character long");
    return Value(pystr::pad(s, int_or(a[0], 0), name == "center" ? '^' : name == "ljust" ? '<' : '>', fill));
  }
  if (name == "zfill") {
    const auto a = bind({"width"});
    const int64_t width = int_or(a[0], 0);
    const int64_t len = static_cast<int64_t>(pystr::length(s));
    if (width <= len) return Value(s);
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    std::string out = s;
    out.insert(sign, static_cast<size_t>(width - len), '0');
    return Value(out);
  }
  if (name == "partition" || name == "rpartition") {
    const auto a = bind({"sep"});
    const std::string sep = str_arg(a[0], "partition");
    if (sep.empty()) throw RenderError("empty separator");
    const size_t k = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (k == std::string::npos)
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")}) : Value::tuple({Value(""), Value(""), Value(s)});
    return Value::tuple({Value(s.substr(0, k)), Value(sep), Value(s.substr(k + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind({"affix"});
    const std::string t = str_arg(a[0], std::string(name).c_str());
    if (name == "removeprefix") return Value(s.compare(0, t.size(), t) == 0 ? s.substr(t.size()) : s);
    return Value(t.size() <= s.size() && s.compare(s.size() - t.size(), t.size(), t) == 0 ? s.substr(0, s.size() - t.size()) : s);
  }
  if (name == "expandtabs") {
    const auto a = bind({"tabsize"});
    const int64_t tab = int_or(a[0], 8);
    std::string out;
    int64_t col = 0;
    for (const auto& c : pystr::chars(s)) {
      if (c == "\t") {
        const int64_t n = tab > 0 ? tab - col % tab : 0;
        out.append(static_cast<size_t>(n), ' ');
        col += n;
      } else {
        out += c;
        col = (c == "\n" || c == "\r") ? 0 : col + 1;
      }
    }
    return Value(out);
  }
  if (name.substr(0, 2) == "is") {
    bind({});
    if (auto r = pystr::predicate(name.substr(2), s)) return *r;
  }
  throw RenderError("str." + std::string(name) + "() is not supported");
}

Value dict_method(const Value& obj, std::string_view name, CallArgs& args) {
  const Dict& d = obj.map();
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(args, {}, name);
    List out;
    out.reserve(d.size());
    for (const auto& [k, v] : d.entries) {
      if (name == "items") out.push_back(Value::tuple({k, v}));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::list(std::move(out));
  }
  if (name == "get") {
    const auto a = bind_args(args, {"key", "default"}, "get");
    if (!a[0]) throw RenderError("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*a[0])) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  if (name == "copy") return Value::dict(d);
  throw RenderError("dict." + std::string(name) + "() is not supported");
}

Value list_method(const Value& obj, std::string_view name, CallArgs& args) {
  const List& items = obj.items();
  if (name == "index" || name == "count") {
    const auto a = bind_args(args, {"value", "start", "stop"}, name);
    if (!a[0]) throw RenderError(std::string(name) + "() takes at least 1 argument (0 given)");
    int64_t n = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      if (!equals(items[k], *a[0])) continue;
      if (name == "index" && static_cast<int64_t>(k) >= int_or(a[1], 0)) return static_cast<int64_t>(k);
      ++n;
    }
    if (name == "index") throw RenderError(a[0]->repr() + " is not in list");
    return n;
  }
  if (name == "copy") return Value::list(items);
  throw RenderError(obj.type_name() + "." + std::string(name) + "() is not supported");
}

}  // namespace

std::string unsafe_message(const Value& obj, std::string_view name) {
  return "access to attribute '" + std::string(name) + "' of '" + obj.type_name() + "' object is unsafe.";
}

MethodKind find_method(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::String: return in(kStrMethods, name) ? MethodKind::Safe : MethodKind::None;
    case Kind::Dict:
      if (in(kDictSafe, name)) return MethodKind::Safe;
      return in(kDictUnsafe, name) ? MethodKind::Unsafe : MethodKind::None;
    case Kind::List:
      if (in(kListSafe, name)) return MethodKind::Safe;
      return in(kListUnsafe, name) ? MethodKind::Unsafe : MethodKind::None;
    case Kind::Tuple: return name == "index" || name == "count" ? MethodKind::Safe : MethodKind::None;
    default: return MethodKind::None;
  }
}

Value call_method(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args) {
  switch (obj.kind()) {
    case Kind::String: return str_method(in, obj.str(), name, args);
    case Kind::Dict: return dict_method(obj, name, args);
    case Kind::List:
    case Kind::Tuple: return list_method(obj, name, args);
    default: throw RenderError("'" + obj.type_name() + "' object has no attribute '" + std::string(name) + "'");
  }
}

}  // namespace ember::jinja
