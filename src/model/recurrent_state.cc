#include "model/recurrent_state.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace ember::model {

RecurrentLayout::RecurrentLayout(const ModelConfig& c) {
  slot.assign(static_cast<size_t>(c.num_hidden_layers), -1);
  for (size_t l = 0; l < c.layers.size() && l < slot.size(); ++l)
    if (c.layers[l].kind == LayerKind::kLinear) slot[l] = layers++;
  const LinearAttentionConfig& a = c.linear;
  conv_floats = a.conv_kernel > 0 ? (a.conv_kernel - 1) * a.conv_channels() : 0;
  state_floats = a.value_heads * a.key_dim * a.value_dim;
}

float* RecurrentState::conv(int64_t layer) {
  if (data_.empty()) data_.assign(static_cast<size_t>(layout_->floats()), 0.0f);
  return data_.data() + layout_->slot[static_cast<size_t>(layer)] * layout_->layer_floats();
}

void RecurrentState::begin_pass(int64_t from, int64_t to, int64_t block) {
  if (!active()) return;
  // A pass that computes held positions again (LongRoPE's recomputation from 0) starts from their state.
  if (from < at_ && restore(from) != from)
    fail("recurrent state", "a pass from position " + std::to_string(from) + " has no state snapshot there");
  at_ = to;
  if (layout_->snapshot_limit <= 0) return;
  const auto limit = static_cast<size_t>(layout_->snapshot_limit);
  std::vector<int64_t> fresh;  // the pass's boundaries, the last `limit` of them
  for (int64_t p = to - to % block; p > from && fresh.size() < limit; p -= block) fresh.push_back(p);
  for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) {
    // A position held from an earlier history is that history's state: replaced, not shared.
    snaps_.erase(std::remove_if(snaps_.begin(), snaps_.end(), [p = *it](const Snapshot& s) { return s.pos >= p; }),
                 snaps_.end());
    snaps_.push_back({*it, std::make_shared<std::vector<float>>(static_cast<size_t>(layout_->floats()))});
  }
  if (snaps_.size() > limit) snaps_.erase(snaps_.begin(), snaps_.end() - static_cast<std::ptrdiff_t>(limit));
}

float* RecurrentState::snapshot_at(int64_t pos, int64_t layer) {
  for (Snapshot& s : snaps_)
    if (s.pos == pos) return s.data->data() + layout_->slot[static_cast<size_t>(layer)] * layout_->layer_floats();
  return nullptr;
}

int64_t RecurrentState::restore(int64_t pos) {
  if (!active()) return pos;
  while (!snaps_.empty() && snaps_.back().pos > pos) snaps_.pop_back();
  if (snaps_.empty()) {
    data_.clear();
    return at_ = 0;
  }
  data_ = *snaps_.back().data;
  return at_ = snaps_.back().pos;
}

std::vector<int64_t> RecurrentState::snapshot_positions() const {
  std::vector<int64_t> out;
  for (const Snapshot& s : snaps_) out.push_back(s.pos);
  return out;
}

}  // namespace ember::model
