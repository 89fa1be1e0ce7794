#pragma once
// Internal: per-instruction-set kernels behind matmul(). Each computes one thread's share of rows.
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace ember::kernels::detail {

constexpr int64_t kTokenBlock = 64;  // tokens whose activations stay in L2 while a weight tile is reused

// Panel-packed plain weights: 16-row panels [g0, g1) for all n tokens.
void panel_rows_avx2(const WeightMatrix& w, const float* x, int64_t n, float* y, int64_t g0, int64_t g1);

// Quantized weights: 16-row groups [g0, g1) for all tokens of a.
void quant_groups_avx2(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1);
void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1);

// Offset subtracted from the unsigned form of a quant: q8 values are stored signed and flipped to
// q + 128, q4 nibbles hold q + 8.
inline int32_t quant_offset(QType q) { return q == QType::Q8_0 ? 128 : 8; }

}  // namespace ember::kernels::detail
