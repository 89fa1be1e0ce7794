// AVX-512 kernels of K-quant weights (kquant.h), laid out as the Q8_0 / Q4_0 ones: the lanes are a
// group's 16 rows, each vpdpbusd adds 4 consecutive products of every row, and each sub-block's
// integer sums are scaled in float once per token. Compiled with exactly the AVX-512 features the
// quantized kernels need (F, BW, VNNI: CMakeLists.txt, cpu.h).
#include "kernels/avx512_intrinsics.h"

#include <algorithm>

#include "kernels/kquant_simd.h"
#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

// Tokens per tile: the 2 x NT integer sums of a sub-block pair and the NT float sums of a super-block
// stay in registers with the unpacked weights; the totals, touched once per super-block, may spill.
// 8 measured faster than 4 and 6 (kernels_bench, q4_k / q5_k / q6_k at 16 and 64 tokens).
constexpr int kKqTileTokens512 = 8;

// The 16 rows' float values of one byte per row (a scale or min of sub-block j), signed for Q6_K.
template <QType Q>
inline __m512 kq_row_bytes512(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (Q == QType::Q6_K) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
  else return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}

// Unit u of sub-block j: the nibbles of v under low4 with their high bits (Q5_K's bit 4, Q6_K's 4
// and 5) from the tile's high block hv above them: a 16-bit shift takes the fields to bit 4 of their
// own bytes (what crosses into the lane's other byte is masked off), and one vpternlogd does
// (v & low4) | high, as the bits are disjoint.
template <QType Q>
inline __m512i kq_unit512(__m512i v, __m512i low4, __m512i hv, int j, int u) {
  if constexpr (Q == QType::Q4_K) {
    return _mm512_and_si512(v, low4);
  } else {
    const int s = kq_high_to_bit4<Q>(j, u);
    const __m512i at4 = s >= 0 ? _mm512_slli_epi16(hv, static_cast<unsigned>(s)) : _mm512_srli_epi16(hv, static_cast<unsigned>(-s));
    const __m512i high = _mm512_and_si512(at4, _mm512_set1_epi8(kq_high_mask<Q>()));
    return _mm512_ternarylogic_epi32(v, low4, high, 0xEA);  // (v & low4) | high
  }
}

// One group x NT tokens over all super-blocks.
template <QType Q, int NT>
[[gnu::noinline]] void kq_tile512(const uint8_t* tiles, const KQuantActs& a, int64_t t0, float* y, int64_t ldy,
                                  __mmask16 rows_mask) {
  using S = KqShape<Q>;
  const int64_t nb = a.n_blocks;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // The token and unit loops must unroll (GCC does not at -O2) or the accumulators live on the stack.
  __m512 acc[NT];
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = tiles + b * kq_tile_bytes(Q);
    // Decode streams the weights from memory once: one core keeps too few reads in flight to reach
    // the bandwidth while it computes, so a few super-blocks ahead are fetched (past the group's end
    // is the next group's, or harmless: prefetches do not fault).
    if constexpr (NT <= 2)
      for (int64_t l = 0; l < kq_tile_bytes(Q); l += kCacheLine)
        _mm_prefetch(reinterpret_cast<const char*>(tile + kDecodePrefetchAhead + l), _MM_HINT_T0);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqD)));
    __m512 dm;  // the mins' factor: dmin, or Q6_K's 32 * d (its offset 32 times its scales)
    if constexpr (Q == QType::Q6_K) dm = _mm512_mul_ps(d, _mm512_set1_ps(32.0f));
    else dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqDmin)));
    __m512 f[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) f[t] = _mm512_setzero_ps();
    for (int p = 0; p < S::kPairs; ++p) {
      // Integer sums are exact in any order: with few tokens each sum is split into C chains
      // (units u % C) so vpdpbusd's latency is not the critical path.
      constexpr int C = NT <= 2 ? 2 : 1;
      __m512i sa[C][NT], sb[C][NT];
      #pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) sa[c][t] = sb[c][t] = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int u = 0; u < S::kUnits; ++u) {
        const __m512i v = _mm512_loadu_si512(tile + S::kNibbles + 64 * (p * S::kUnits + u));
        __m512i hv = _mm512_setzero_si512();
        if constexpr (Q != QType::Q4_K) hv = _mm512_loadu_si512(tile + kq_high_block(Q, 2 * p, u));
        const __m512i lo = kq_unit512<Q>(v, low4, hv, 2 * p, u);
        const __m512i hi = kq_unit512<Q>(_mm512_srli_epi16(v, 4), low4, hv, 2 * p + 1, u);
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = a.q.data() + (t0 + t) * a.cols + b * kQK_K + 4 * u;
          sa[u % C][t] = _mm512_dpbusd_epi32(sa[u % C][t], lo, _mm512_set1_epi32(kq_x4(xq + S::kWidth * 2 * p)));
          sb[u % C][t] = _mm512_dpbusd_epi32(sb[u % C][t], hi, _mm512_set1_epi32(kq_x4(xq + S::kWidth * (2 * p + 1))));
        }
      }
      if constexpr (C == 2) {
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          sa[0][t] = _mm512_add_epi32(sa[0][t], sa[1][t]);
          sb[0][t] = _mm512_add_epi32(sb[0][t], sb[1][t]);
        }
      }
      const __m512 sca = kq_row_bytes512<Q>(tile + S::kScales + 16 * (2 * p));
      const __m512 scb = kq_row_bytes512<Q>(tile + S::kScales + 16 * (2 * p + 1));
      __m512 ma, mb;
      if constexpr (Q == QType::Q6_K) {
        ma = _mm512_mul_ps(dm, sca);
        mb = _mm512_mul_ps(dm, scb);
      } else {
        ma = _mm512_mul_ps(dm, kq_row_bytes512<Q>(tile + kKqMin + 16 * (2 * p)));
        mb = _mm512_mul_ps(dm, kq_row_bytes512<Q>(tile + kKqMin + 16 * (2 * p + 1)));
      }
      const __m512 da = _mm512_mul_ps(d, sca), db = _mm512_mul_ps(d, scb);
      #pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int64_t tb = (t0 + t) * nb + b;
        f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sa[0][t]), da, f[t]);
        f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sb[0][t]), db, f[t]);
        f[t] = _mm512_fnmadd_ps(ma, _mm512_set1_ps(kq_act_sum<Q>(a, tb, 2 * p)), f[t]);
        f[t] = _mm512_fnmadd_ps(mb, _mm512_set1_ps(kq_act_sum<Q>(a, tb, 2 * p + 1)), f[t]);
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(f[t], _mm512_set1_ps(a.d[(t0 + t) * nb + b]), acc[t]);
  }
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows_mask, acc[t]);
}

}  // namespace

void kquant_groups_avx512(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t g0, int64_t g1) {
  with_kquant_type(w.qtype, [&]<QType Q>() {
    for_each_kquant_tile<kKqTileTokens512>(w, a, g0, g1, [&]<int NT>(const uint8_t* tiles, int64_t g, int64_t t) {
      const int64_t r = g * kKqRows;
      const __mmask16 m = w.rows - r >= kKqRows ? __mmask16(0xFFFF) : __mmask16((1u << (w.rows - r)) - 1);
      kq_tile512<Q, NT>(tiles, a, t, y + t * w.rows + r, w.rows, m);
    });
  });
}

}  // namespace ember::kernels::detail
