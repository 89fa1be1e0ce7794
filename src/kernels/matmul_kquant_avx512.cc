// AVX-512 kernels of K-quant weights (kquant.h), laid out as the Q8_0 / Q4_0 ones: the lanes are a
// group's 16 rows, each vpdpbusd adds 4 consecutive products of every row, each sub-block's sums
// are multiplied by its scale in integers, and a super-block's exact sums meet the floats once per
// token (kquant_row_dot's order, so the bits equal the scalar reference's and AVX2's). Compiled with
// exactly the AVX-512 features the quantized kernels need (F, BW, VNNI: CMakeLists.txt, cpu.h).
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

// Lane r of the result: row r's pair of 16-bit factors (sub-blocks 2p, 2p + 1) from the 16 byte
// pairs at p (kq_pair_byte), signed for Q6_K's scales.
template <bool Signed>
inline __m512i kq_pairs512(const uint8_t* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return Signed ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
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
  constexpr bool kSix = Q == QType::Q6_K;
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
    __m512i isum[NT], msum[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
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
        const __m512i v = _mm512_loadu_si512(tile + S::kNibbles + kq_unit_offset(Q, p, u));
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
      // The pair's scales as 32-bit lanes (the low and high halves of each pair), and its mins (Q6_K:
      // the scales again) times the activations' sums, two per madd.
      const __m512i sc = kq_pairs512<kSix>(tile + S::kScales + 32 * p);
      const __m512i sca = kSix ? _mm512_srai_epi32(_mm512_slli_epi32(sc, 16), 16) : _mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF));
      const __m512i scb = kSix ? _mm512_srai_epi32(sc, 16) : _mm512_srli_epi32(sc, 16);
      const __m512i m = kSix ? sc : kq_pairs512<false>(tile + kKqMin + 32 * p);
      #pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int64_t tb = (t0 + t) * nb + b;
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(sa[0][t], sca), _mm512_mullo_epi32(sb[0][t], scb)));
        msum[t] = _mm512_add_epi32(msum[t], _mm512_madd_epi16(m, _mm512_set1_epi32(kq_act_sum_pair<Q>(a, tb, p))));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqD)));
    // The mins' factor: dmin, or Q6_K's 32 * d (its offset 32 times its scales).
    const __m512 dm = kSix ? _mm512_mul_ps(d, _mm512_set1_ps(32.0f))
                           : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqDmin)));
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + t) * nb + b]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, dx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dm, dx), acc[t]);
    }
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
