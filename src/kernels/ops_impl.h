#pragma once
// Internal: what ops.cc (dispatch, scalar reference) shares with ops_avx2.cc.
#include <cstdint>

#include "kernels/exp.h"

namespace ember::kernels::detail {

// One output of silu_mul; the AVX2 loop's exp8 gives the same bits as exp_det, so both agree exactly.
inline float silu_mul1(float g, float u) { return g / (1.0f + exp_det(-g)) * u; }

// Sum of x[i]^2 over one row, in double (exact enough for long rows).
double sum_squares_avx2(const float* x, int64_t n);
void silu_mul_avx2(float* gate, const float* up, int64_t n);
// dst[i] = src[i] as float16, rounded to nearest even.
void to_f16_avx2(const float* src, int64_t n, uint16_t* dst);

}  // namespace ember::kernels::detail
