// The delta rule (delta_rule_simd.h) in 8 lanes of __m256 (AVX2 and FMA, the build's baseline).
#include <immintrin.h>

#include "kernels/delta_rule_simd.h"

namespace ember::kernels::detail {

namespace {
struct DeltaYmm {
  using F = __m256;
  static constexpr int64_t kLanes = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
};
}  // namespace

// 4 vectors (32 columns) per sweep: two accumulator sets of 4 beside the broadcasts fit the 16 registers.
void delta_rule_avx2(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n) {
  delta_rule_impl<DeltaYmm, 4>(S, dk, dv, h, n);
}

}  // namespace ember::kernels::detail
