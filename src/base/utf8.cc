#include "base/utf8.h"

namespace ember::utf8 {

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Returns the length of a valid sequence at s[pos], or 0 if it is invalid or truncated.
static size_t valid_length(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const int n = sequence_length(b0);
  if (n == 0 || pos + n > s.size()) return 0;
  if (n == 1) return 1;
  const auto b1 = static_cast<unsigned char>(s[pos + 1]);
  // Reject overlong forms, surrogates and code points past U+10FFFF via the second byte's range.
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 == 0xE0) lo = 0xA0;
  else if (b0 == 0xED) hi = 0x9F;
  else if (b0 == 0xF0) lo = 0x90;
  else if (b0 == 0xF4) hi = 0x8F;
  else if (b0 < 0xC2 || b0 > 0xF4) return 0;
  if (b1 < lo || b1 > hi) return 0;
  for (int i = 2; i < n; ++i) {
    if ((static_cast<unsigned char>(s[pos + i]) & 0xC0) != 0x80) return 0;
  }
  return static_cast<size_t>(n);
}

char32_t decode(std::string_view s, size_t& pos) {
  const size_t n = valid_length(s, pos);
  if (n == 0) {
    ++pos;
    return 0xFFFD;
  }
  const auto b0 = static_cast<unsigned char>(s[pos]);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

bool is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = valid_length(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

size_t complete_prefix(std::string_view s) {
  // Only the last 3 bytes can hold an unfinished sequence.
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = sequence_length(c);
    if (n > 1 && i + n > s.size()) {
      // A truncated but so-far-valid sequence: hold it back.
      bool prefix_ok = true;
      for (size_t j = i + 1; j < s.size(); ++j)
        if ((static_cast<unsigned char>(s[j]) & 0xC0) != 0x80) prefix_ok = false;
      if (prefix_ok) return i;
    }
  }
  return s.size();
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = valid_length(s, pos);
    if (n > 0) {
      out.append(s.substr(pos, n));
      pos += n;
      continue;
    }
    // One U+FFFD per maximal invalid subpart: a valid lead byte swallows the continuation bytes
    // that could still have completed it (Python's errors="replace", Rust's from_utf8_lossy).
    const auto b0 = static_cast<unsigned char>(s[pos]);
    const int need = (b0 >= 0xC2 && b0 <= 0xF4) ? sequence_length(b0) - 1 : 0;
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b0 == 0xED ? 0x9F : b0 == 0xF4 ? 0x8F : 0xBF;
    size_t len = 1;
    for (int i = 0; i < need && pos + len < s.size(); ++i, ++len) {
      const auto b = static_cast<unsigned char>(s[pos + len]);
      if (b < (i == 0 ? lo : 0x80) || b > (i == 0 ? hi : 0xBF)) break;
    }
    out += "\xEF\xBF\xBD";
    pos += len;
  }
  return out;
}

}  // namespace ember::utf8
