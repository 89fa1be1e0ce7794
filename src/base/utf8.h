#pragma once
// UTF-8 helpers shared by the tokenizer, the streaming detokenizer and the chat layer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::utf8 {

// Length of the UTF-8 sequence that starts with lead byte `c` (1..4), or 0 if `c` is not a lead byte.
inline int sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 0;
}

// Appends the UTF-8 encoding of code point `cp` to `out`.
void append(std::string& out, char32_t cp);

// Decodes one code point at `pos`, advancing `pos`. Invalid bytes decode as U+FFFD (one byte consumed).
char32_t decode(std::string_view s, size_t& pos);

// True if `s` is entirely valid UTF-8.
bool is_valid(std::string_view s);

// Number of leading bytes of `s` that form complete UTF-8 characters; an incomplete sequence at the
// end is excluded (invalid bytes in the middle count as complete, they can never become valid).
size_t complete_prefix(std::string_view s);

// Replaces invalid sequences by U+FFFD the way Python's bytes.decode(errors="replace") does.
std::string sanitize(std::string_view s);

}  // namespace ember::utf8
