// AVX2 loops (with FMA and F16C) of the element-wise and row-wise operations that have them.
#include <immintrin.h>

#include "base/dtype.h"
#include "kernels/ops_impl.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels::detail {

double sum_squares_avx2(const float* x, int64_t n) {
  // Two 4-lane double chains: one sequential double chain costs its add latency per element, more
  // than the rest of the norm.
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    a0 = _mm256_fmadd_pd(lo, lo, a0);
    a1 = _mm256_fmadd_pd(hi, hi, a1);
  }
  alignas(__m256d) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return ss;
}

void silu_mul_avx2(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = silu_mul1(gate[i], up[i]);
}

void to_f16_avx2(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace ember::kernels::detail
