// The prompt attention kernel (attention_prompt.h) in 16 lanes of __m512, twice the rows per
// instruction of the AVX2 one and the same bits. Only AVX512F is used (CMakeLists.txt); it is called
// only where cpu.cc found the Avx512 set.
#include "kernels/avx512_intrinsics.h"

#include "kernels/attention_prompt.h"

namespace ember::kernels::detail {

namespace {

struct Zmm {
  using F = __m512;
  using I = __m512i;
  static constexpr int64_t kLanes = 16;
  static constexpr int kKeys = 8;   // score accumulators: enough chains to hide the FMA latency
  static constexpr int kAcc = 16;   // weighted-sum accumulators of a pass (32 registers)
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static I load_i(const int32_t* p) { return _mm512_load_si512(p); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F bcast(const float* p) { return _mm512_set1_ps(*p); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F exp(F x) { return exp16(x); }
  static __mmask16 gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static F select(__mmask16 mask, F yes, F no) { return _mm512_mask_mov_ps(no, mask, yes); }
  static uint32_t bits(__mmask16 mask) { return static_cast<uint32_t>(mask); }
  // x, with -inf where key j is after the lane's position or before its first visible one.
  static F hide(F x, F minus_inf, int32_t j, I pos, I lo) {
    const __m512i key = _mm512_set1_epi32(j);
    const __mmask16 hidden = _mm512_cmpgt_epi32_mask(key, pos) | _mm512_cmpgt_epi32_mask(lo, key);
    return _mm512_mask_mov_ps(x, hidden, minus_inf);
  }
};

}  // namespace

void attend_block_avx512(const AttentionItem& it, int64_t t0, int64_t nt, int64_t kvh, const AttentionShape& s,
                         AttnScratch& w) {
  with_row_reader(it.kv.type, s.head_dim,
                  [&]<class R>(R) { prompt::attend_block<Zmm, R>(it, t0, nt, kvh, s, w); });
}

}  // namespace ember::kernels::detail
