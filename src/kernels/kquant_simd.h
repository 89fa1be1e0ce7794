#pragma once
// Internal: the AVX2 helpers that both K-quant kernel files (matmul_kquant_avx2.cc and
// matmul_kquant_avx512.cc) use. Internal linkage on purpose: each file compiles its own copy with its
// own target flags, so the AVX-512 build of a helper can never be the one an AVX2 machine runs.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kquant.h"

namespace ember::kernels::detail {
namespace {

// The float factors of a super-block's two integer sums (kquant_row_dot): d, and dm for the mins
// (Q6_K: 32 * d, its offset of 32 times its scales).
struct KqFactors {
  float d, dm;
};
template <QType Q>
inline KqFactors kq_factors(const uint8_t* blk) {
  uint16_t h[2];
  std::memcpy(h, blk, 4);
  const float d = _cvtsh_ss(h[0]);
  if constexpr (Q == QType::Q6_K) return {d, 32.0f * d};
  else return {d, _cvtsh_ss(h[1])};
}

// The 16 int16 weights of the mins term, one per 16 activations (their sums are in KQuantActs::bsum):
// Q4_K / Q5_K each min twice (a sub-block is 32 wide), Q6_K its scales (the offset 32 is in dm).
template <QType Q>
inline __m256i kq_min_weights(const uint8_t* blk) {
  if constexpr (Q == QType::Q6_K) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKq6Scales)));
  } else {
    const __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kKqScales + 8)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m));
  }
}

// The mins term of token tb's super-block: 8 int32 partial sums of weights times activation sums.
inline __m256i kq_min_sums(__m256i mw, const KQuantActs& a, int64_t tb) {
  return _mm256_madd_epi16(mw, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsum.data() + tb * 16)));
}

}  // namespace
}  // namespace ember::kernels::detail
