#include "jinja/pystr.h"

#include <algorithm>

#include <utf8proc.h>

#include "base/utf8.h"

namespace ember::jinja::pystr {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out += utf8::decode(s, pos);
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8::append(out, c);
  return out;
}

std::vector<std::string> chars(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    utf8::decode(s, pos);
    out.emplace_back(s.substr(start, pos - start));
  }
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  if (is_ascii(s) && (!chars || is_ascii(*chars))) {
    size_t b = 0, e = s.size();
    if (left)
      while (b < e && strip_it(static_cast<unsigned char>(s[b]))) ++b;
    if (right)
      while (e > b && strip_it(static_cast<unsigned char>(s[e - 1]))) --e;
    return std::string(s.substr(b, e - b));
  }
  const std::u32string u = decode(s);
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return encode(std::u32string_view(u).substr(b, e - b));
}

namespace {

// Runs of whitespace split the text; leading/trailing whitespace yields no empty pieces.
std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool reverse) {
  const std::u32string u = decode(s);
  std::vector<std::u32string> parts;
  if (!reverse) {
    size_t k = 0;
    while (true) {
      while (k < u.size() && is_space(u[k])) ++k;
      if (k >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = u.size();
        parts.push_back(u.substr(k, e - k));
        break;
      }
      const size_t start = k;
      while (k < u.size() && !is_space(u[k])) ++k;
      parts.push_back(u.substr(start, k - start));
    }
  } else {
    size_t k = u.size();
    while (true) {
      while (k > 0 && is_space(u[k - 1])) --k;
      if (k == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(u.substr(0, k));
        break;
      }
      const size_t end = k;
      while (k > 0 && !is_space(u[k - 1])) --k;
      parts.push_back(u.substr(k, end - k));
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<std::string> out;
  for (const auto& p : parts) out.push_back(encode(p));
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, false);
  std::vector<std::string> out;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t k = s.find(*sep, start);
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(start, k - start));
    start = k + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, true);
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t k = s.rfind(*sep, end - sep->size());
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(k + sep->size(), end - k - sep->size()));
    end = k;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0, k = 0;
  while (k < u.size()) {
    const char32_t c = u[k];
    const bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++k;
      continue;
    }
    size_t end = k + 1;
    if (c == '\r' && end < u.size() && u[end] == '\n') ++end;
    out.push_back(encode(std::u32string_view(u).substr(start, (keepends ? end : k) - start)));
    start = k = end;
  }
  if (start < u.size()) out.push_back(encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every character and at the end.
    const auto cs = chars(s);
    int64_t done = 0;
    for (const auto& c : cs) {
      if (count < 0 || done < count) out += repl, ++done;
      out += c;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t k = s.find(old, start);
    if (k == std::string_view::npos) break;
    out.append(s.substr(start, k - start));
    out.append(repl);
    start = k + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

namespace {

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) utf8::append(out, f(utf8::decode(s, pos)));
  return out;
}

char32_t to_upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t to_title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c || to_title(c) != c; }

}  // namespace

std::string upper(std::string_view s) { return map_chars(s, to_upper); }
std::string lower(std::string_view s) { return map_chars(s, to_lower); }
std::string swapcase(std::string_view s) {
  return map_chars(s, [](char32_t c) { return to_upper(c) != c ? to_upper(c) : to_lower(c); });
}

std::string title(std::string_view s) {
  bool prev_cased = false;
  return map_chars(s, [&](char32_t c) {
    const char32_t r = prev_cased ? to_lower(c) : to_title(c);
    prev_cased = is_cased(c);
    return r;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_chars(s, [&](char32_t c) {
    const char32_t r = first ? to_title(c) : to_lower(c);
    first = false;
    return r;
  });
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t k = reverse ? s.rfind(sub) : s.find(sub);
  if (k == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, k)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t k = s.find(sub); k != std::string_view::npos; k = s.find(sub, k + sub.size())) ++n;
  return n;
}

std::optional<bool> predicate(std::string_view name, std::string_view s) {
  const std::u32string u = decode(s);
  auto cat = [](char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); };
  auto is_alpha = [&](char32_t c) {
    const auto k = cat(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
  };
  auto is_decimal = [&](char32_t c) { return cat(c) == UTF8PROC_CATEGORY_ND; };
  auto is_numeric = [&](char32_t c) {
    const auto k = cat(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
  };
  auto all = [&](auto pred) {
    if (u.empty()) return false;
    for (char32_t c : u)
      if (!pred(c)) return false;
    return true;
  };
  if (name == "ascii") return is_ascii(s);
  if (name == "digit" || name == "decimal") return all(is_decimal);
  if (name == "numeric") return all(is_numeric);
  if (name == "alpha") return all(is_alpha);
  if (name == "alnum") return all([&](char32_t c) { return is_alpha(c) || is_numeric(c); });
  if (name == "space") return all(is_space);
  if (name == "upper" || name == "lower") {
    bool any_cased = false;
    for (char32_t c : u) {
      if (!is_cased(c)) continue;
      any_cased = true;
      if (name == "upper" ? to_upper(c) != c : to_lower(c) != c) return false;
    }
    return any_cased;
  }
  if (name == "title") {
    bool prev_cased = false, any = false;
    for (char32_t c : u) {
      if (to_lower(c) != c) {
        if (prev_cased) return false;
        prev_cased = any = true;
      } else if (to_upper(c) != c) {
        if (!prev_cased) return false;
        prev_cased = any = true;
      } else {
        prev_cased = false;
      }
    }
    return any;
  }
  return std::nullopt;
}

std::string pad(std::string_view s, int64_t width, char align, std::string_view fill) {
  const int64_t len = static_cast<int64_t>(length(s));
  if (width <= len) return std::string(s);
  const int64_t marg = width - len;
  int64_t left = 0;
  if (align == '>') left = marg;
  else if (align == '^') left = marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < marg - left; ++k) out += fill;
  return out;
}

}  // namespace ember::jinja::pystr
