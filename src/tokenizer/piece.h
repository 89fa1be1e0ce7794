#pragma once
// The pieces an input string is cut into before the model sees it, and the Hugging Face split
// behaviours that cut them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace ember::tokenizer {

struct Piece {
  std::string text;
  bool at_origin = false;  // starts at offset 0 of the original input (Metaspace prepend_scheme "first")
  int32_t added_id = -1;   // >= 0: an added token, already final
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Span {
  ByteRange range;
  bool is_match;
};

// Turns the matches inside a text of `len` bytes into spans covering all of it.
std::vector<Span> cover(size_t len, const std::vector<ByteRange>& matches);
// Each character satisfying `pred` is one match.
template <typename Pred>
std::vector<ByteRange> char_matches(std::string_view s, Pred pred);
// The ranges kept by `behavior` (Hugging Face NormalizedString::split).
std::vector<ByteRange> apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior);

// Replaces each piece that is not an added token by the sub-pieces fn(text) returns (byte ranges of
// text); empty pieces are dropped. A sub-piece starting at 0 inherits at_origin.
template <typename Fn>
void split_pieces(std::vector<Piece>& pieces, Fn&& fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) {
    if (p.added_id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    for (const auto& [b, e] : fn(std::string_view(p.text))) {
      if (e > b) out.push_back(Piece{p.text.substr(b, e - b), p.at_origin && b == 0, -1});
    }
  }
  pieces = std::move(out);
}

}  // namespace ember::tokenizer

#include "tokenizer/unicode.h"

namespace ember::tokenizer {
template <typename Pred>
std::vector<ByteRange> char_matches(std::string_view s, Pred pred) {
  std::vector<ByteRange> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    if (pred(unicode::next(s, pos))) out.emplace_back(start, pos);
  }
  return out;
}
}  // namespace ember::tokenizer
