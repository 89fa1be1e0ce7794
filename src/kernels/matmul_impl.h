#pragma once
// Internal: what matmul.cc (dispatch, scalar reference) shares with the per-instruction-set kernels
// in matmul_avx2.cc and matmul_avx512.cc. Each kernel computes one thread's share of rows.
#include <algorithm>
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace ember::kernels::detail {

constexpr int64_t kTokenBlock = 64;  // tokens whose activations stay in L2 while a weight tile is reused

// Panel-packed plain weights: 16-row panels [g0, g1) for all n tokens (AVX2 and AVX-512 machines).
void panel_rows_avx2(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t g0, int64_t g1);

// Quantized weights: 16-row groups [g0, g1) for all tokens of a.
void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1);
void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1);

// Calls f(quants, scales, g, t0, t1) for each 16-row group g in [g0, g1) and each block [t0, t1) of
// a's tokens; quants and scales point at the group's. Token blocks are outermost: a group's weights
// stay in L2 while a block of tokens reuses them.
template <class F>
void for_each_group(const WeightMatrix& w, const QuantizedActs& a, int64_t g0, int64_t g1, F&& f) {
  const int64_t nb = a.n_blocks, bb = qblock_bytes(w.qtype);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t t0 = 0; t0 < a.n; t0 += kTokenBlock) {
    const int64_t t1 = std::min(a.n, t0 + kTokenBlock);
    for (int64_t g = g0; g < g1; ++g) f(base + g * nb * bb, w.scales + g * nb * kQGroupRows, g, t0, t1);
  }
}

// Offset subtracted from the unsigned form of a quant: q8 values are stored signed and flipped to
// q + 128, q4 nibbles hold q + 8.
constexpr int32_t quant_offset(QType q) { return q == QType::Q8_0 ? 128 : 8; }

}  // namespace ember::kernels::detail
