#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace ember::model {

Rope::Rope(const ModelConfig& config) : Rope(config, config.rope) {}

Rope::Rope(const ModelConfig& config, const RopeConfig& rope)
    : c_(config), rope_(rope), half_(config.rope_dim() / 2),
      inv_(rope_inv_freq(config, rope, config.max_position_embeddings)) {}

void Rope::grow(int64_t positions) {
  if (positions <= positions_) return;
  // Whole pages of positions at once, at least the first 4096 (or the trained context if shorter).
  const int64_t n = std::max({positions, 2 * positions_, std::min<int64_t>(4096, c_.max_position_embeddings)});
  cos_.resize(static_cast<size_t>(n * half_));
  sin_.resize(static_cast<size_t>(n * half_));
  for (int64_t p = positions_; p < n; ++p)
    for (int64_t j = 0; j < half_; ++j) {
      const double a = static_cast<double>(p) * inv_[static_cast<size_t>(j)];
      cos_[static_cast<size_t>(p * half_ + j)] = static_cast<float>(std::cos(a));
      sin_[static_cast<size_t>(p * half_ + j)] = static_cast<float>(std::sin(a));
    }
  positions_ = n;
}

void Rope::prepare(std::span<const int64_t> pos, std::span<const int64_t> seq_len) {
  const size_t n = pos.size();
  int64_t last = 0;
  for (int64_t p : pos) last = std::max(last, p);
  grow(last + 1);  // before pointers into the table are taken
  scaled_.resize(n * static_cast<size_t>(2 * half_));
  cos_of_.resize(n);
  sin_of_.resize(n);
  for (size_t t = 0; t < n; ++t) {
    if (rope_.scaling != RopeScaling::Dynamic || seq_len[t] <= c_.max_position_embeddings) {
      cos_of_[t] = cos_.data() + pos[t] * half_;
      sin_of_[t] = sin_.data() + pos[t] * half_;
      continue;
    }
    if (seq_len[t] != scaled_len_) {
      scaled_inv_ = rope_inv_freq(c_, rope_, seq_len[t]);
      scaled_len_ = seq_len[t];
    }
    float* cs = scaled_.data() + t * static_cast<size_t>(2 * half_);
    for (int64_t j = 0; j < half_; ++j) {
      const double a = static_cast<double>(pos[t]) * scaled_inv_[static_cast<size_t>(j)];
      cs[j] = static_cast<float>(std::cos(a));
      cs[half_ + j] = static_cast<float>(std::sin(a));
    }
    cos_of_[t] = cs;
    sin_of_[t] = cs + half_;
  }
}

void Rope::apply(float* q, float* k, size_t t) const {
  const int64_t hd = c_.head_dim, rd = 2 * half_;
  kernels::rope_rotate_half(q, c_.num_attention_heads, hd, rd, cos_of_[t], sin_of_[t]);
  kernels::rope_rotate_half(k, c_.num_key_value_heads, hd, rd, cos_of_[t], sin_of_[t]);
}

}  // namespace ember::model
