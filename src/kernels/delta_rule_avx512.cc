// The delta rule (delta_rule_simd.h) in 16 lanes of __m512. Only AVX512F is used (CMakeLists.txt);
// it is called only where cpu.cc found the Avx512 set.
#include "kernels/avx512_intrinsics.h"

#include "kernels/delta_rule_simd.h"

namespace ember::kernels::detail {

namespace {
struct DeltaZmm {
  using F = __m512;
  static constexpr int64_t kLanes = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
};
}  // namespace

// 8 vectors (128 columns, a whole head of Qwen3.5's) per sweep: 16 accumulators of the 32 registers.
void delta_rule_avx512(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n) {
  delta_rule_impl<DeltaZmm, 8>(S, dk, dv, h, n);
}

}  // namespace ember::kernels::detail
