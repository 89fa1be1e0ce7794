#include "sampling/grammar_vocabulary.h"

#include <algorithm>


namespace ember::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, const std::vector<bool>& control)
    : bytes_(std::move(token_bytes)), usable_(bytes_.size(), 0) {
  constexpr size_t kMaxTokenBytes = 0xFFFF;
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if ((id < control.size() && control[id]) || bytes_[id].empty() || bytes_[id].size() > kMaxTokenBytes) continue;
    usable_[id] = 1;
    order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  // Sorted strings make the preorder directly: each string adds the nodes below its common prefix
  // with the one before it.
  const std::string* prev = nullptr;
  for (const int32_t id : order) {
    const std::string& s = bytes(id);
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    if (prev && common == s.size() && common == prev->size()) {  // the same bytes as the token before
      tokens_.push_back(id);
      continue;
    }
    for (size_t d = common + 1; d <= s.size(); ++d)
      nodes_.push_back({0, static_cast<uint32_t>(tokens_.size()), static_cast<uint16_t>(d), static_cast<uint8_t>(s[d - 1])});
    tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  const auto n = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({n, static_cast<uint32_t>(tokens_.size()), 0, 0});
  // skip: the next node at the same depth or above.
  std::vector<uint32_t> open;  // nodes whose subtree has not ended, by depth
  for (uint32_t i = 0; i < n; ++i) {
    while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) {
      nodes_[open.back()].skip = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (const uint32_t i : open) nodes_[i].skip = n;
}

}  // namespace ember::grammar
