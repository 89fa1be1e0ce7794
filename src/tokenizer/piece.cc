#include "tokenizer/piece.h"

#include <algorithm>

namespace ember::tokenizer {

std::vector<Span> cover(size_t len, const std::vector<ByteRange>& matches) {
  std::vector<Span> spans;
  if (len == 0) return {Span{{0, 0}, false}};
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) spans.push_back({{prev, b}, false});
    spans.push_back({{b, e}, true});
    prev = e;
  }
  if (prev != len) spans.push_back({{prev, len}, false});
  return spans;
}

std::vector<ByteRange> apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<ByteRange> out;
  out.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& s : spans) out.push_back(s.range);
      break;
    case SplitBehavior::Removed:
      for (const auto& s : spans)
        if (!s.is_match) out.push_back(s.range);
      break;
    case SplitBehavior::Contiguous:
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !out.empty())
          out.back().second = s.range.second;
        else
          out.push_back(s.range);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !out.empty())
          out.back().second = s.range.second;
        else
          out.push_back(s.range);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t i = spans.size(); i-- > 0;) {
        const auto& s = spans[i];
        if (s.is_match && !previous_match && !out.empty())
          out.back().first = s.range.first;
        else
          out.push_back(s.range);
        previous_match = s.is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

}  // namespace ember::tokenizer
