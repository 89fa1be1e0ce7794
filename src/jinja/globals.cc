// Global functions (range, namespace, dict, raise_exception, strftime_now, cycler, joiner),
// argument binding, and Python's number conversions.
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ember::jinja {

std::vector<const Value*> bind_args(const CallArgs& args, std::initializer_list<std::string_view> names,
                                    std::string_view fn) {
  std::vector<const Value*> out(names.size(), nullptr);
  if (args.positional.size() > names.size())
    throw RenderError(std::string(fn) + "() takes at most " + std::to_string(names.size()) + " arguments (" +
                      std::to_string(args.positional.size()) + " given)");
  for (size_t k = 0; k < args.positional.size(); ++k) out[k] = &args.positional[k];
  for (const auto& [key, v] : args.keyword) {
    size_t k = 0;
    for (auto n : names) {
      if (n == key) break;
      ++k;
    }
    if (k == names.size()) throw RenderError(std::string(fn) + "() got an unexpected keyword argument '" + key + "'");
    if (out[k]) throw RenderError(std::string(fn) + "() got multiple values for argument '" + key + "'");
    out[k] = &v;
  }
  return out;
}

std::optional<int64_t> to_int(const Value& v, int base) {
  switch (v.kind()) {
    case Kind::Bool:
    case Kind::Int: return v.as_int();
    case Kind::Float: {
      const double d = v.as_double();
      if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return std::nullopt;
      return static_cast<int64_t>(std::trunc(d));
    }
    case Kind::String: {
      std::string s = pystr::strip(v.str(), std::nullopt, true, true);
      std::string clean;
      for (size_t k = 0; k < s.size(); ++k)
        if (s[k] != '_' || (k > 0 && k + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[k - 1])) &&
                            std::isalnum(static_cast<unsigned char>(s[k + 1]))))
          clean += s[k];
      if (clean.empty()) return std::nullopt;
      size_t start = (clean[0] == '+' || clean[0] == '-') ? 1 : 0;
      if (start == clean.size()) return std::nullopt;
      if (base == 16 && clean.size() > start + 1 && clean[start] == '0' && (clean[start + 1] == 'x' || clean[start + 1] == 'X'))
        clean.erase(start, 2);
      char* end = nullptr;
      errno = 0;
      const long long r = std::strtoll(clean.c_str(), &end, base);
      if (errno || *end != '\0' || std::isspace(static_cast<unsigned char>(clean[start]))) return std::nullopt;
      return r;
    }
    default: return std::nullopt;
  }
}

std::optional<double> to_float(const Value& v) {
  switch (v.kind()) {
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float: return v.as_double();
    case Kind::String: {
      const std::string s = pystr::lower(pystr::strip(v.str(), std::nullopt, true, true));
      if (s.empty()) return std::nullopt;
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (*end != '\0') return std::nullopt;
      if ((s.find("inf") != std::string::npos && s != "inf" && s != "+inf" && s != "-inf" && s != "infinity" &&
           s != "+infinity" && s != "-infinity") ||
          s.find("0x") != std::string::npos)
        return std::nullopt;
      return d;
    }
    default: return std::nullopt;
  }
}

namespace {

int64_t int_arg(const Value* v, const char* fn) {
  if (!v || !(v->is_int() || v->is_bool()))
    throw RenderError(std::string("'") + (v ? v->type_name() : "NoneType") + "' object cannot be interpreted as an integer in " + fn + "()");
  return v->as_int();
}

constexpr int64_t kMaxRange = 100000;  // the sandbox's MAX_RANGE

Value g_range(Interpreter&, CallArgs& args) {
  if (!args.keyword.empty()) throw RenderError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw RenderError("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = int_arg(&p[0], "range");
  } else {
    start = int_arg(&p[0], "range");
    stop = int_arg(&p[1], "range");
    if (p.size() == 3) step = int_arg(&p[2], "range");
  }
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  List out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange)
      throw RenderError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.emplace_back(k);
  }
  return Value::list(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& args) {
  Dict d;
  if (args.positional.size() > 1) throw RenderError("dict expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (!src.is_mapping()) throw RenderError("dict() argument must be a mapping");
    d = src.map();
  }
  for (auto& [k, v] : args.keyword) d.set(Value(k), v);
  return Value::dict(std::move(d));
}

Value g_namespace(Interpreter& in, CallArgs& args) {
  Value v = g_dict(in, args);
  return Value::namespace_(v.map());
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  const auto a = bind_args(args, {"message"}, "raise_exception");
  throw TemplateException(a[0] ? a[0]->to_str() : "");
}

Value g_strftime_now(Interpreter& in, CallArgs& args) {
  const auto a = bind_args(args, {"format"}, "strftime_now");
  if (!a[0] || !a[0]->is_string()) throw RenderError("strftime_now() argument must be str");
  const std::time_t t = in.now();
  std::tm tm{};
  localtime_r(&t, &tm);
  const std::string& fmt = a[0]->str();
  if (fmt.empty()) return Value(std::string());
  std::string buf(fmt.size() * 8 + 64, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  buf.resize(n);
  return Value(std::move(buf));
}

Value g_joiner(Interpreter&, CallArgs& args) {
  const auto a = bind_args(args, {"sep"}, "joiner");
  const std::string sep = a[0] ? a[0]->to_str() : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [sep, used](Interpreter&, CallArgs&) -> Value {
    if (!*used) {
      *used = true;
      return Value(std::string());
    }
    return Value(sep);
  });
}

}  // namespace

GlobalFn find_global(std::string_view name) {
  static constexpr std::pair<std::string_view, GlobalFn> table[] = {
      {"range", g_range},
      {"dict", g_dict},
      {"namespace", g_namespace},
      {"raise_exception", g_raise_exception},
      {"strftime_now", g_strftime_now},
      {"joiner", g_joiner},
  };
  for (const auto& [n, f] : table)
    if (n == name) return f;
  return nullptr;
}

}  // namespace ember::jinja
