// Python string formatting: `fmt % args` (the `format` filter) and str.format().
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ember::jinja {

namespace {

std::string c_format(const std::string& spec, const Value& v, char type) {
  char buf[512];
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o') {
    const std::string f = spec + "ll" + type;
    std::snprintf(buf, sizeof buf, f.c_str(), static_cast<long long>(v.as_int()));
  } else {
    const std::string f = spec + type;
    std::snprintf(buf, sizeof buf, f.c_str(), v.as_double());
  }
  return buf;
}

Value number_arg(const Value& v, char type) {
  if (v.is_number()) {
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o') return Value(to_int(v).value_or(0));
    return v;
  }
  throw RenderError(std::string("%") + type + " format: a real number is required, not " + v.type_name());
}

// Inserts thousands separators into the integer part of a formatted number.
std::string group_digits(const std::string& s, char sep) {
  size_t b = 0;
  while (b < s.size() && !std::isdigit(static_cast<unsigned char>(s[b]))) ++b;
  size_t e = b;
  while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
  std::string digits = s.substr(b, e - b), out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k && (digits.size() - k) % 3 == 0) out += sep;
    out += digits[k];
  }
  return s.substr(0, b) + out + s.substr(e);
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  List positional;
  const Value* mapping = nullptr;
  if (args.kind() == Kind::Tuple) positional = args.items();
  else if (args.is_mapping()) mapping = &args;
  else positional.push_back(args);
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) throw RenderError("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) throw RenderError("incomplete format");
    const Value* named = nullptr;
    if (fmt[k] == '(') {
      const size_t close = fmt.find(')', k);
      if (close == std::string::npos || !mapping) throw RenderError("format requires a mapping");
      named = mapping->map().find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!named) throw RenderError("KeyError: '" + fmt.substr(k + 1, close - k - 1) + "'");
      k = close + 1;
    }
    std::string flags;
    while (k < fmt.size() && std::string_view("-+ #0").find(fmt[k]) != std::string_view::npos) flags += fmt[k++];
    std::string width, precision;
    bool has_precision = false;
    if (k < fmt.size() && fmt[k] == '*') width = std::to_string(take().as_int()), ++k;
    while (k < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[k]))) width += fmt[k++];
    if (k < fmt.size() && fmt[k] == '.') {
      has_precision = true;
      ++k;
      if (k < fmt.size() && fmt[k] == '*') precision = std::to_string(take().as_int()), ++k;
      while (k < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[k]))) precision += fmt[k++];
    }
    if (k >= fmt.size()) throw RenderError("incomplete format");
    char type = fmt[k];
    if (type == '%') {
      out += '%';
      continue;
    }
    const Value& v = named ? *named : take();
    if (type == 's' || type == 'r' || type == 'a') {
      std::string s = type == 's' ? v.to_str() : v.repr();
      if (has_precision) {
        const auto cps = pystr::decode(s);
        s = pystr::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(std::stoll("0" + precision))));
      }
      const int64_t w = width.empty() ? 0 : std::stoll(width);
      out += pystr::pad(s, w, flags.find('-') != std::string::npos ? '<' : '>');
      continue;
    }
    if (type == 'i' || type == 'u') type = 'd';
    if (type == 'c') {
      out += v.is_string() ? v.str() : pystr::encode(std::u32string(1, static_cast<char32_t>(v.as_int())));
      continue;
    }
    if (std::string_view("dxXofFeEgG").find(type) == std::string_view::npos)
      throw RenderError(std::string("unsupported format character '") + type + "'");
    const std::string spec = "%" + flags + width + (has_precision ? "." + precision : "");
    out += c_format(spec, number_arg(v, type), type);
  }
  if (!mapping && next < positional.size() && args.kind() == Kind::Tuple)
    throw RenderError("not all arguments converted during string formatting");
  return out;
}

namespace {

// format(value, spec) with Python's format mini-language.
std::string format_spec(const Value& v, const std::string& spec) {
  size_t k = 0;
  char fill = ' ', align = 0, sign = '-';
  bool alt = false, zero = false;
  char grouping = 0;
  if (spec.size() >= 2 && std::string_view("<>^=").find(spec[1]) != std::string_view::npos) {
    fill = spec[0];
    align = spec[1];
    k = 2;
  } else if (!spec.empty() && std::string_view("<>^=").find(spec[0]) != std::string_view::npos) {
    align = spec[0];
    k = 1;
  }
  if (k < spec.size() && std::string_view("+- ").find(spec[k]) != std::string_view::npos) sign = spec[k++];
  if (k < spec.size() && spec[k] == '#') alt = true, ++k;
  if (k < spec.size() && spec[k] == '0') zero = true, ++k;
  int64_t width = 0;
  while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) width = width * 10 + (spec[k++] - '0');
  if (k < spec.size() && (spec[k] == ',' || spec[k] == '_')) grouping = spec[k++];
  int precision = -1;
  if (k < spec.size() && spec[k] == '.') {
    precision = 0;
    ++k;
    while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) precision = precision * 10 + (spec[k++] - '0');
  }
  char type = k < spec.size() ? spec[k++] : 0;
  if (k != spec.size()) throw RenderError("Invalid format specifier");
  std::string body;
  if (v.is_string() || (!v.is_number())) {
    if (type && type != 's') throw RenderError(std::string("Unknown format code '") + type + "' for object of type '" + v.type_name() + "'");
    body = v.to_str();
    if (precision >= 0) body = pystr::encode(std::u32string_view(pystr::decode(body)).substr(0, static_cast<size_t>(precision)));
    if (!align) align = '<';
  } else {
    if (!align) align = zero ? '=' : '>';
    if (zero && fill == ' ') fill = '0';
    const bool is_int = v.is_int() || v.is_bool();
    if (!type && is_int) type = 'd';
    std::string flags;
    if (sign == '+' || sign == ' ') flags += sign;
    if (alt) flags += '#';
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c') {
      if (!is_int) throw RenderError(std::string("Unknown format code '") + type + "' for object of type 'float'");
      if (type == 'c') {
        body = pystr::encode(std::u32string(1, static_cast<char32_t>(v.as_int())));
      } else if (type == 'b') {
        uint64_t x = static_cast<uint64_t>(std::llabs(v.as_int()));
        std::string bits;
        do bits.insert(bits.begin(), static_cast<char>('0' + (x & 1))); while (x >>= 1);
        body = (v.as_int() < 0 ? "-" : (sign == '+' ? "+" : sign == ' ' ? " " : "")) + std::string(alt ? "0b" : "") + bits;
      } else {
        body = c_format("%" + flags, Value(v.as_int()), type);
      }
    } else if (!type) {
      body = precision < 0 ? v.to_str() : c_format("%" + flags + "." + std::to_string(precision), v, 'g');
      if (precision < 0 && (sign == '+' || sign == ' ') && v.as_double() >= 0) body = std::string(1, sign) + body;
    } else if (type == '%') {
      body = c_format("%" + flags + "." + std::to_string(precision < 0 ? 6 : precision), Value(v.as_double() * 100), 'f') + "%";
    } else if (std::string_view("fFeEgGn").find(type) != std::string_view::npos) {
      if (type == 'n') type = 'g';
      body = c_format("%" + flags + "." + std::to_string(precision < 0 ? 6 : precision), v, type);
    } else {
      throw RenderError(std::string("Unknown format code '") + type + "' for object of type '" + v.type_name() + "'");
    }
    if (grouping) body = group_digits(body, grouping);
  }
  if (align == '=') {
    size_t sign_len = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    const int64_t len = static_cast<int64_t>(pystr::length(body));
    if (width > len) body.insert(sign_len, static_cast<size_t>(width - len), fill);
    return body;
  }
  return pystr::pad(body, width, align, std::string(1, fill));
}

}  // namespace

std::string brace_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') ++k;
      else throw RenderError("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    const size_t close = fmt.find('}', k);
    if (close == std::string::npos) throw RenderError("Single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    std::string spec;
    char conv = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) spec = field.substr(colon + 1), field.resize(colon);
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    const std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0]))) {
      const size_t index = head.empty() ? auto_index++ : static_cast<size_t>(std::stoul(head));
      if (index >= args.positional.size())
        throw RenderError("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      const Value* kv = args.kw(head);
      if (!kv) throw RenderError("KeyError: '" + head + "'");
      v = *kv;
    }
    while (name_end != std::string::npos && name_end < field.size()) {
      if (field[name_end] == '.') {
        const size_t e = field.find_first_of(".[", name_end + 1);
        const std::string attr = field.substr(name_end + 1, e == std::string::npos ? std::string::npos : e - name_end - 1);
        const Value* f = v.is_mapping() ? v.map().find(std::string_view(attr)) : nullptr;
        if (!f) throw RenderError("'" + v.type_name() + "' object has no attribute '" + attr + "'");
        v = *f;
        name_end = e;
      } else {
        const size_t e = field.find(']', name_end);
        if (e == std::string::npos) throw RenderError("Missing ']' in format string");
        const std::string key = field.substr(name_end + 1, e - name_end - 1);
        const Value* f = nullptr;
        if (v.is_mapping()) f = v.map().find(std::string_view(key));
        else if (v.is_sequence() && !key.empty() && std::isdigit(static_cast<unsigned char>(key[0])) && std::stoul(key) < v.items().size())
          f = &v.items()[std::stoul(key)];
        if (!f) throw RenderError("KeyError: '" + key + "'");
        v = *f;
        name_end = e + 1;
      }
    }
    if (conv == 'r' || conv == 'a') v = Value(v.repr());
    else if (conv == 's') v = Value(v.to_str());
    out += format_spec(v, spec);
  }
  return out;
}

}  // namespace ember::jinja
