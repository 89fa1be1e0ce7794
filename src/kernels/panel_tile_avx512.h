#pragma once
// Internal: what the AVX-512 panel kernels (float32, matmul_panel_avx512.cc; BF16 dot,
// matmul_panel_bf16_avx512.cc) share: the accumulators of their register tiles, NP panels x NT tokens,
// one zmm of 16 rows each, at y[t * ldy + p * 16] (rows of the last panel outside `last` neither read
// nor written); the order of their blocks is panel_blocks.h's.
#include "kernels/avx512_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/panel_blocks.h"

namespace ember::kernels::detail {

// From zero, or (add) from the exact floats y holds: a column block carries its sums on.
// Every loop over panels and tokens must unroll (GCC does not at -O2) or the accumulators live on the stack.
template <int NP, int NT>
[[gnu::always_inline]] inline void load_tile(__m512 (&acc)[NP][NT], const float* y, int64_t ldy, bool add,
                                             __mmask16 last) {
  #pragma GCC unroll 16
  for (int p = 0; p < NP; ++p) {
    const __mmask16 m = p == NP - 1 ? last : __mmask16(0xFFFF);
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) acc[p][t] = add ? _mm512_maskz_loadu_ps(m, y + t * ldy + p * kPanelRows) : _mm512_setzero_ps();
  }
}

template <int NP, int NT>
[[gnu::always_inline]] inline void store_tile(const __m512 (&acc)[NP][NT], float* y, int64_t ldy, __mmask16 last) {
  #pragma GCC unroll 16
  for (int p = 0; p < NP; ++p) {
    const __mmask16 m = p == NP - 1 ? last : __mmask16(0xFFFF);
    #pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy + p * kPanelRows, m, acc[p][t]);
  }
}

// The tile's outputs, into L1 for writing a few steps before its end: its column block's weights and
// activations fill L1 meanwhile, and the stores of outputs evicted from it stalled the next tile.
constexpr int64_t kOutputFetchSteps = 16;
template <int NP, int NT>
[[gnu::always_inline]] inline void fetch_outputs(const float* y, int64_t ldy) {
  #pragma GCC unroll 32
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int p = 0; p < NP; ++p) {  // 16 floats: one line, or two where y is not 64-byte aligned
      asm volatile("prefetchw %0" : : "m"(y[t * ldy + p * kPanelRows]));
      asm volatile("prefetchw %0" : : "m"(y[t * ldy + p * kPanelRows + kPanelRows - 1]));
    }
}

// A tile's column loop: step(k) for k < steps, the next block fetched along (BlockFetch) and the
// outputs kOutputFetchSteps before the end.
template <int NP, int NT, class Step>
[[gnu::always_inline]] inline void tile_steps(int64_t steps, const BlockFetch& next, const float* y, int64_t ldy,
                                              Step&& step) {
  BlockFetch fetch = next;
  const int64_t tail = std::max<int64_t>(0, steps - kOutputFetchSteps);
  for (int64_t k = 0; k < tail; ++k) {
    fetch.at_step(k);
    step(k);
  }
  fetch_outputs<NP, NT>(y, ldy);
  for (int64_t k = tail; k < steps; ++k) {
    fetch.at_step(k);
    step(k);
  }
  fetch.finish();
}

// The mask of the rows of the last of np panels from g that a matrix of `rows` rows has.
inline __mmask16 last_panel_rows(int64_t rows, int64_t g, int np) {
  const int64_t valid = std::min<int64_t>(kPanelRows, rows - (g + np - 1) * kPanelRows);
  return static_cast<__mmask16>((1u << valid) - 1);
}

}  // namespace ember::kernels::detail
