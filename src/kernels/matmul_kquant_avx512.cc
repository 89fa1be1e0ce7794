// AVX-512 kernels of K-quant weights (kquant.h): as the AVX2 ones (matmul_kquant_avx2.cc) with 64
// weights per step and VNNI's vpdpwssd multiplying the maddubs pairs by the sub-block scales. Compiled
// with exactly the AVX-512 features the quantized kernels need (F, BW, VNNI: CMakeLists.txt, cpu.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kquant_simd.h"
#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

// Tokens per tile: 2 x NT accumulators and the unpacked weights stay in the 32 registers.
constexpr int kKqTileTokens512 = 8;

inline __m512i kq_load512(const void* p) { return _mm512_loadu_si512(p); }

// Sum of the 16 lanes, through memory: GCC 12 warns falsely inside _mm512_reduce_add_ps and the
// 256-bit extracts.
inline float kq_hsum512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  __m128 q = _mm_add_ps(_mm_add_ps(_mm_load_ps(lanes), _mm_load_ps(lanes + 4)),
                        _mm_add_ps(_mm_load_ps(lanes + 8), _mm_load_ps(lanes + 12)));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// The int16 lanes of a 64-weight step's scales: lane l of step m takes scale m * n + l / (32 / n) of
// the n sub-blocks the step spans (Q4_K / Q5_K: 2 of 32 weights, Q6_K: 4 of 16).
template <int N>
inline __m512i kq_scale_index(int m) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(m * N + l / (32 / N));
  return _mm512_load_si512(idx);
}

template <QType Q, int NT>
[[gnu::noinline]] void kq_tile512(const uint8_t* row, const KQuantActs& a, int64_t t0, float* y, int64_t ldy) {
  constexpr int64_t bb = kq_block_bytes(Q);
  constexpr int kSubPerStep = Q == QType::Q6_K ? 4 : 2;
  const int64_t nb = a.n_blocks;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i sidx[4] = {kq_scale_index<kSubPerStep>(0), kq_scale_index<kSubPerStep>(1),
                           kq_scale_index<kSubPerStep>(2), kq_scale_index<kSubPerStep>(3)};
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    // Scales as int16 in the low lanes, spread to each step's lanes by kq_scale_index.
    __m512i sc16;
    if constexpr (Q == QType::Q6_K)
      sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKq6Scales))));
    else
      sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kKqScales))));
    // Adds the products of step m (weights [64m, 64m + 64), unsigned).
    auto step = [&](int m, __m512i wq) {
      const __m512i sc = _mm512_permutexvar_epi16(sidx[m], sc16);
      for (int t = 0; t < NT; ++t) {
        const __m512i xq = kq_load512(a.q.data() + (t0 + t) * a.cols + b * kQK_K + 64 * m);
        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(wq, xq), sc);
      }
    };
    const uint8_t* qs = blk + (Q == QType::Q6_K ? kKq6Ql : kKqQs);
    __m512i qh6 = _mm512_setzero_si512();
    if constexpr (Q == QType::Q6_K) qh6 = kq_load512(blk + kKq6Qh);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = kq_load512(qs + 64 * h);
      __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      const int mlo = 2 * h, mhi = 2 * h + 1;
      if constexpr (Q == QType::Q6_K) {
        const __m512i three = _mm512_set1_epi8(3);
        lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh6, 2 * mlo), three), 4));
        hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh6, 2 * mhi), three), 4));
      } else if constexpr (Q == QType::Q5_K) {
        uint64_t blo, bhi;
        std::memcpy(&blo, blk + kKq5Qh + 8 * mlo, 8);
        std::memcpy(&bhi, blk + kKq5Qh + 8 * mhi, 8);
        const __m512i sixteen = _mm512_set1_epi8(16);  // a set fifth bit adds 16 to the nibble
        lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(blo), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(bhi), hi, sixteen);
      }
      step(mlo, lo);
      step(mhi, hi);
    }
    const auto [d, dm] = kq_factors<Q>(blk);
    // The mins term (Q6_K: the scales already widened above).
    const __m256i mw = Q == QType::Q6_K ? _mm512_castsi512_si256(sc16) : kq_min_weights<Q>(blk);
    for (int t = 0; t < NT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      const float dx = a.d[tb];
      const __m256i ms = kq_min_sums(mw, a, tb);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * dx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(ms)), _mm512_set1_ps(dm * dx), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) y[t * ldy] = kq_hsum512(acc[t]);
}

}  // namespace

void kquant_rows_avx512(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t r0, int64_t r1) {
  with_kquant_type(w.qtype, [&]<QType Q>() {
    for_each_kquant_tile<kKqTileTokens512>(w, a, r0, r1, [&]<int NT>(const uint8_t* row, int64_t r, int64_t t) {
      kq_tile512<Q, NT>(row, a, t, y + t * w.rows + r, w.rows);
    });
  });
}

}  // namespace ember::kernels::detail
