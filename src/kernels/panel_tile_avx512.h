#pragma once
// Internal: the accumulators of the AVX-512 panel kernels' register tiles (float32,
// matmul_panel_avx512.cc; BF16 dot, matmul_panel_bf16_avx512.cc): NP panels x NT tokens, one zmm of
// 16 rows each, at y[t * ldy + p * 16]; rows of the last panel outside `last` neither read nor written.
#include "kernels/avx512_intrinsics.h"

#include <cstdint>

namespace ember::kernels::detail {

// From zero, or (add) from the exact floats y holds: a column block carries its sums on.
// Every loop over panels and tokens must unroll (GCC does not at -O2) or the accumulators live on the stack.
template <int NP, int NT>
[[gnu::always_inline]] inline void load_tile(__m512 (&acc)[NP][NT], const float* y, int64_t ldy, bool add,
                                             __mmask16 last) {
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const __mmask16 m = p == NP - 1 ? last : __mmask16(0xFFFF);
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) acc[p][t] = add ? _mm512_maskz_loadu_ps(m, y + t * ldy + p * 16) : _mm512_setzero_ps();
  }
}

template <int NP, int NT>
[[gnu::always_inline]] inline void store_tile(const __m512 (&acc)[NP][NT], float* y, int64_t ldy, __mmask16 last) {
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const __mmask16 m = p == NP - 1 ? last : __mmask16(0xFFFF);
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy + p * 16, m, acc[p][t]);
  }
}

}  // namespace ember::kernels::detail
