#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace ember::model {

Rope::Rope(const ModelConfig& config)
    : c_(config), half_(config.head_dim / 2), inv_(rope_inv_freq(config, config.max_position_embeddings)) {}

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

void Rope::apply(float* q, float* k, int64_t pos, int64_t seq_len) {
  const float* cs;
  const float* sn;
  if (c_.rope.scaling == RopeScaling::Dynamic && seq_len > c_.max_position_embeddings) {
    if (seq_len != scaled_len_) {
      scaled_inv_ = rope_inv_freq(c_, seq_len);
      scaled_len_ = seq_len;
    }
    scaled_cos_.resize(static_cast<size_t>(half_));
    scaled_sin_.resize(static_cast<size_t>(half_));
    for (int64_t j = 0; j < half_; ++j) {
      const double a = static_cast<double>(pos) * scaled_inv_[static_cast<size_t>(j)];
      scaled_cos_[static_cast<size_t>(j)] = static_cast<float>(std::cos(a));
      scaled_sin_[static_cast<size_t>(j)] = static_cast<float>(std::sin(a));
    }
    cs = scaled_cos_.data();
    sn = scaled_sin_.data();
  } else {
    grow(pos + 1);
    cs = cos_.data() + pos * half_;
    sn = sin_.data() + pos * half_;
  }
  kernels::rope_rotate_half(q, c_.num_attention_heads, c_.head_dim, cs, sn);
  kernels::rope_rotate_half(k, c_.num_key_value_heads, c_.head_dim, cs, sn);
}

}  // namespace ember::model
