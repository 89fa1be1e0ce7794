#pragma once
// exp(x) from our own polynomial, to ~1 ulp: exp_det for one value and exp8 and exp16, its AVX2 and
// AVX-512 twins, which do the same operations in the same order and so give the same bits. Softmax in attention, SiLU
// and sampling use them; libm's exp is scalar and its last bit varies between libraries.
// Both return 0 below -87 and for NaN, and saturate at exp(88).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ember::kernels {

namespace exp_constants {
constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split so that n * kLn2Hi is exact (Cody-Waite range reduction).
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kMin = -87.0f;  // below this the result is flushed to 0
constexpr float kMax = 88.0f;
// Taylor coefficients 1/k!, k = 7..2; on |r| <= ln2/2 the truncation error is below 1e-8.
constexpr float kC[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f};
}  // namespace exp_constants

inline float exp_det(float x) {
  using namespace exp_constants;
  if (!(x >= kMin)) return 0.0f;
  x = std::min(x, kMax);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kC[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kC[i]);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const auto e = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(e);
}

#if defined(__AVX2__) && defined(__FMA__)
[[gnu::always_inline]] inline __m256 exp8(__m256 x) {
  using namespace exp_constants;
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kMin), _CMP_GE_OQ);
  x = _mm256_min_ps(x, _mm256_set1_ps(kMax));
  x = _mm256_max_ps(x, _mm256_set1_ps(kMin));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[i]));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}
#endif

#if defined(__AVX512F__) || defined(EMBER_AVX512_EMULATED_INTRINSICS)
// exp8's operations on 16 lanes, in the same order, so every lane's result is exp8's (and exp_det's).
[[gnu::always_inline]] inline __m512 exp16(__m512 x) {
  using namespace exp_constants;
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMin), _CMP_GE_OQ);
  x = _mm512_min_ps(x, _mm512_set1_ps(kMax));
  x = _mm512_max_ps(x, _mm512_set1_ps(kMin));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kC[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC[i]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}
#endif

}  // namespace ember::kernels
