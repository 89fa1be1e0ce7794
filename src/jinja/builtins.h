#pragma once
// Jinja2's filters and tests, the global functions, and the methods of str, dict and list
// values, each looked up by name.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace ember::jinja {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);
using GlobalFn = Value (*)(Interpreter&, CallArgs&);

FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
GlobalFn find_global(std::string_view name);

enum class MethodKind { None, Safe, Unsafe };
// Whether `name` is a method of `obj`'s Python type, and whether the immutable sandbox allows it.
MethodKind find_method(const Value& obj, std::string_view name);
Value call_method(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args);

// Binds call arguments to parameter names the way Python does for a function signature;
// absent parameters are nullptr. Throws RenderError naming `fn` on unknown or extra arguments.
std::vector<const Value*> bind_args(const CallArgs& args, std::initializer_list<std::string_view> names,
                                    std::string_view fn);

// Python int()/float() conversions used by filters and methods; nullopt when not convertible.
std::optional<int64_t> to_int(const Value& v, int base = 10);
std::optional<double> to_float(const Value& v);

// Python's `fmt % args` (printf-style) and `fmt.format(*args, **kwargs)`.
std::string percent_format(const std::string& fmt, const Value& args);
std::string brace_format(const std::string& fmt, const CallArgs& args);

// Python's SecurityError text for a mutating method the immutable sandbox refuses.
std::string unsafe_message(const Value& obj, std::string_view name);

}  // namespace ember::jinja
