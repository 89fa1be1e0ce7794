#pragma once
// Internal: what the AVX2 attention kernels (attention_avx2.cc for single tokens,
// attention_prompt_avx2.cc for prompts) share: row readers' vector loads and per-row helpers.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/attention_impl.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels::detail::attn_simd {

// 8 values from element i of a row, as float32.
template <DType T>
inline __m256 load8(ElemRow<T>, const void* row, int64_t i) {
  return simd::load8<T>(row, i);
}
template <int64_t B>
inline __m256 load8(Q8Row<B>, const void* row, int64_t i) {
  const auto* blk = static_cast<const uint8_t*>(row) + (i / B) * (B + 2);
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + i % B));
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _mm256_mul_ps(v, _mm256_set1_ps(_cvtsh_ss(h)));
}

// Soft-capping of a tile's scores (the scalar kernel does the same per score).
inline void cap_scores(float* e, int64_t n, float cap) {
  if (cap > 0)
    for (int64_t j = 0; j < n; ++j) e[j] = std::tanh(e[j] / cap) * cap;
}

inline void scale_row(float* x, float r, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

}  // namespace ember::kernels::detail::attn_simd
