#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace ember::model {

Rope::Rope(const ModelConfig& config) : Rope(config, config.rope) {}

Rope::Rope(const ModelConfig& config, const RopeConfig& rope)
    : c_(config), rope_(rope), head_dim_(rope.head_dim > 0 ? rope.head_dim : config.head_dim),
      half_((rope.head_dim > 0 ? rope.head_dim : config.rope_dim()) / 2) {
  tables_[0].inv = rope_inv_freq(config, rope, 1);  // a short sequence's: unscaled by length
  if (rope.scaling == RopeScaling::LongRope)
    tables_[1].inv = rope_inv_freq(config, rope, rope.original_max_position_embeddings + 1);
}

int Rope::factor_set(int64_t seq_len) const {
  return rope_.scaling == RopeScaling::LongRope && seq_len > rope_.original_max_position_embeddings ? 1 : 0;
}

void Rope::grow(Table& table, int64_t positions) {
  if (positions <= table.positions) return;
  // Whole pages of positions at once, at least the first 4096 (or the trained context if shorter).
  const int64_t n = std::max({positions, 2 * table.positions, std::min<int64_t>(4096, c_.max_position_embeddings)});
  table.cos.resize(static_cast<size_t>(n * half_));
  table.sin.resize(static_cast<size_t>(n * half_));
  const double scale = rope_.attention_factor;
  for (int64_t p = table.positions; p < n; ++p)
    for (int64_t j = 0; j < half_; ++j) {
      const double a = static_cast<double>(p) * table.inv[static_cast<size_t>(j)];
      table.cos[static_cast<size_t>(p * half_ + j)] = static_cast<float>(std::cos(a) * scale);
      table.sin[static_cast<size_t>(p * half_ + j)] = static_cast<float>(std::sin(a) * scale);
    }
  table.positions = n;
}

void Rope::prepare(std::span<const int64_t> pos, std::span<const int64_t> seq_len) {
  const size_t n = pos.size();
  const bool dynamic = rope_.scaling == RopeScaling::Dynamic;
  auto scaled = [&](size_t t) { return dynamic && seq_len[t] > c_.max_position_embeddings; };
  int64_t last[2] = {0, 0};
  for (size_t t = 0; t < n; ++t)
    if (!scaled(t)) {
      int64_t& l = last[factor_set(seq_len[t])];
      l = std::max(l, pos[t] + 1);
    }
  for (int s = 0; s < 2; ++s) grow(tables_[s], last[s]);  // before pointers into the tables are taken
  scaled_.resize(n * static_cast<size_t>(2 * half_));
  cos_of_.resize(n);
  sin_of_.resize(n);
  for (size_t t = 0; t < n; ++t) {
    if (!scaled(t)) {
      const Table& table = tables_[factor_set(seq_len[t])];
      cos_of_[t] = table.cos.data() + pos[t] * half_;
      sin_of_[t] = table.sin.data() + pos[t] * half_;
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

void Rope::apply(float* q, float* k, size_t t) const { apply(q, c_.num_attention_heads, k, c_.num_key_value_heads, t); }

void Rope::apply(float* q, int64_t q_heads, float* k, int64_t k_heads, size_t t) const {
  const int64_t rd = 2 * half_;
  kernels::rope_rotate_half(q, q_heads, head_dim_, rd, cos_of_[t], sin_of_[t]);
  if (k != nullptr) kernels::rope_rotate_half(k, k_heads, head_dim_, rd, cos_of_[t], sin_of_[t]);
}

}  // namespace ember::model
