// The prompt attention kernel (attention_prompt.h) in 8 lanes of __m256, run on AVX2 machines.
#include <immintrin.h>

#include "kernels/attention_prompt.h"

namespace ember::kernels::detail {

namespace {

struct Ymm {
  using F = __m256;
  using I = __m256i;
  static constexpr int64_t kLanes = 8;
  static constexpr int kKeys = 8;  // score accumulators: enough chains to hide the FMA latency
  static constexpr int kAcc = 8;   // weighted-sum accumulators of a pass
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static I load_i(const int32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F exp(F x) { return exp8(x); }
  static F gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static F select(F mask, F yes, F no) { return _mm256_blendv_ps(no, yes, mask); }
  static uint32_t bits(F mask) { return static_cast<uint32_t>(_mm256_movemask_ps(mask)); }
  // x, with -inf where key j is after the lane's position or before its first visible one.
  static F hide(F x, F minus_inf, int32_t j, I pos, I lo) {
    const __m256i key = _mm256_set1_epi32(j);
    const __m256i hidden = _mm256_or_si256(_mm256_cmpgt_epi32(key, pos), _mm256_cmpgt_epi32(lo, key));
    return _mm256_blendv_ps(x, minus_inf, _mm256_castsi256_ps(hidden));
  }
};

}  // namespace

void attend_block_avx2(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                       AttnScratch& w) {
  with_row_reader(it.kv.type, s.head_dim,
                  [&]<class R>(R) { prompt::attend_block<Ymm, R>(it, t0, nt, kvh, s, w); });
}

}  // namespace ember::kernels::detail
