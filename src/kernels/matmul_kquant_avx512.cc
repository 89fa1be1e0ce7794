// AVX-512 kernels of K-quant weights (kquant.h), laid out as the Q8_0 / Q4_0 ones: the lanes are a
// group's 16 rows, each vpdpbusd adds 4 consecutive products of every row, each sub-block's sums
// are multiplied by its scale in integers, and a super-block's exact sums meet the floats once per
// token (kquant_row_dot's order, so the bits equal the scalar reference's and AVX2's). Compiled with
// exactly the AVX-512 features the quantized kernels need (F, BW, VNNI: CMakeLists.txt, cpu.h).
// Decode of two tokens runs here, and of one token for the types whose quants lie in one plane
// (kq_one_plane), which the hardware prefetcher streams at the bandwidth; the other types fetch the
// tile two ahead themselves, and decode one token with the AVX2 kernel (matmul.cc).
#include "kernels/avx512_intrinsics.h"

#include <cstring>

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

// A plane's fields of v moved to their bit (s: the byte-wise shift, positive left) under mask: a 16-bit
// shift moves whole fields, and what crosses into the lane's other byte lies outside the mask.
inline __m512i kq_field512(__m512i v, int s, char mask) {
  const __m512i at = s >= 0 ? _mm512_slli_epi16(v, static_cast<unsigned>(s)) : _mm512_srli_epi16(v, static_cast<unsigned>(-s));
  return _mm512_and_si512(at, _mm512_set1_epi8(mask));
}

// Unit u of sub-blocks 2p (lo) and 2p + 1 (hi) of a tile: their quants, unsigned, from the nibbles
// and bit planes the type has (kquant.h; IQ4_XS: its table + 128 looked up).
template <QType Q>
[[gnu::always_inline]] inline void kq_units512(const uint8_t* tile, int p, int u, __m512i& lo, __m512i& hi) {
  lo = hi = _mm512_setzero_si512();
  if constexpr (kq_has_nibbles(Q)) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i v = _mm512_loadu_si512(tile + KqShape<Q>::kNibbles + kq_unit_offset(Q, p, u));
    lo = _mm512_and_si512(v, low4);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
  if constexpr (kq_has_high_plane(Q)) {
    const __m512i hv = _mm512_loadu_si512(tile + kq_high_block(Q, 2 * p, u));
    lo = _mm512_or_si512(lo, kq_field512(hv, kq_high_to_bit4<Q>(2 * p, u), kq_high_mask<Q>()));
    hi = _mm512_or_si512(hi, kq_field512(hv, kq_high_to_bit4<Q>(2 * p + 1, u), kq_high_mask<Q>()));
  }
  if constexpr (Q == QType::Q3_K) {
    const __m512i bv = _mm512_loadu_si512(tile + kq3_bit2_block(2 * p, u));
    lo = _mm512_or_si512(lo, kq_field512(bv, kq3_bit2_to_bit2(2 * p, u), 0x04));
    hi = _mm512_or_si512(hi, kq_field512(bv, kq3_bit2_to_bit2(2 * p + 1, u), 0x04));
  }
  if constexpr (Q == QType::IQ4_XS) {
    const __m512i table = _mm512_load_si512(kIq4Unsigned.b);
    lo = _mm512_shuffle_epi8(table, lo);
    hi = _mm512_shuffle_epi8(table, hi);
  }
  if constexpr (Q == QType::IQ3_S) {  // 16 rows' grid words gathered, then 16 +- each magnitude
    auto unit = [&](int n) {
      const __m512i low = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kKqS3Idx + 16 * n)));
      uint16_t ninth;
      uint64_t signs;
      std::memcpy(&ninth, tile + kKqS3IdxHi + 2 * n, 2);
      std::memcpy(&signs, tile + kKqS3Signs + 8 * n, 8);
      const __m512i index = _mm512_mask_add_epi32(low, ninth, low, _mm512_set1_epi32(256));
      const __m512i mag = _mm512_i32gather_epi32(index, kIq3sGridWords.w, 4);
      const __m512i base = _mm512_set1_epi8(16);
      return _mm512_mask_sub_epi8(_mm512_add_epi8(base, mag), signs, base, mag);
    };
    lo = unit(8 * (2 * p) + u);
    hi = unit(8 * (2 * p + 1) + u);
  }
}

// Decode of one token: the next super-block's activation quants (256 bytes)
// into L1. Between two reads of the same activations a group streams its whole row of tiles through
// L1 (73 KiB of Q4_K at 8192 columns), which evicts them, and each tile's broadcasts waited on L2
// (kernels_bench BM_DecodeStream Q4_K, one thread, Zen 4: 8192 columns 28.2-29.8 -> 31.2-31.4 GB/s,
// level with 2048 columns, which it leaves unchanged; the AVX2 kernel's Q6_K, which fetches its
// tiles itself, read 86% of the probe with it against 89-90% without).
template <int NT>
[[gnu::always_inline]] inline void kq_fetch_next_acts(const KQuantActs& a, int64_t t0, int64_t b) {
  if constexpr (NT == 1) {
    if (b + 1 >= a.n_blocks) return;
    const int8_t* next = a.q.data() + t0 * a.cols + (b + 1) * kQK_K;
    #pragma GCC unroll 4
    for (int64_t l = 0; l < kQK_K; l += kCacheLine) _mm_prefetch(reinterpret_cast<const char*>(next + l), _MM_HINT_T0);
  }
}

// One group x NT tokens over all super-blocks.
template <QType Q, int NT>
[[gnu::noinline]] void kq_tile512(const uint8_t* tiles, const KqGroupScales<Q>& scales, const KQuantActs& a, int64_t t0,
                                  float* y, int64_t ldy, __mmask16 rows_mask) {
  using S = KqShape<Q>;
  constexpr bool kSigned = kq_signed_scales(Q);
  const int64_t nb = a.n_blocks;
  // The token and unit loops must unroll (GCC does not at -O2) or the accumulators live on the stack.
  __m512 acc[NT];
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = tiles + b * kq_tile_bytes(Q);
    kq_fetch_next_acts<NT>(a, t0, b);
    alignas(32) uint8_t buf[KqGroupScales<Q>::kStride];
    const uint8_t* sc_bytes = scales.at(b, tile, buf);
    __m512i isum[NT], msum[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int p = 0; p < S::kPairs; ++p) {
      if constexpr (NT <= 2 && !kq_one_plane(Q)) kq_prefetch_ahead<Q>(tile, p);
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
        __m512i lo, hi;
        kq_units512<Q>(tile, p, u, lo, hi);
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
      // The pair's scales as 32-bit lanes (the low and high halves of each pair), and its mins (Q3_K,
      // Q6_K, IQ4_XS: the scales again; Q2_K: the high nibbles of its scale bytes) times the
      // activations' sums, two per madd.
      const __m512i sbytes = kq_pairs512<kSigned>(sc_bytes + 32 * p);
      const __m512i sc = Q == QType::Q2_K ? _mm512_and_si512(sbytes, _mm512_set1_epi16(0x0F)) : sbytes;
      const __m512i sca = kSigned ? _mm512_srai_epi32(_mm512_slli_epi32(sc, 16), 16) : _mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF));
      const __m512i scb = kSigned ? _mm512_srai_epi32(sc, 16) : _mm512_srli_epi32(sc, 16);
      const __m512i m = kSigned ? sc : Q == QType::Q2_K ? _mm512_srli_epi16(sbytes, 4) : kq_pairs512<false>(sc_bytes + kKqUnpackedMins + 32 * p);
      #pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int64_t tb = (t0 + t) * nb + b;
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(sa[0][t], sca), _mm512_mullo_epi32(sb[0][t], scb)));
        msum[t] = _mm512_add_epi32(msum[t], _mm512_madd_epi16(m, _mm512_set1_epi32(kq_act_sum_pair<Q>(a, tb, p))));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqD)));
    if constexpr (Q == QType::IQ4_XS) {  // the table's offset 128 off in integers: one product, as the reference
      #pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512 dx = _mm512_set1_ps(a.d[(t0 + t) * nb + b]);
        const __m512i exact = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(msum[t], 7));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(d, dx), acc[t]);
      }
    } else {
      // The mins' factor: dmin, or Q3_K / Q6_K's 4 / 32 * d (the offset times the scales).
      const __m512 dm = kq_has_dmin(Q) ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kKqDmin)))
                                       : _mm512_mul_ps(d, _mm512_set1_ps(static_cast<float>(kq_offset(Q))));
      #pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512 dx = _mm512_set1_ps(a.d[(t0 + t) * nb + b]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, dx), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dm, dx), acc[t]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows_mask, acc[t]);
}

}  // namespace

void kquant_groups_avx512(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t g0, int64_t g1) {
  with_kquant_type(w.qtype, [&]<QType Q>() {
    KqGroupScales<Q> scales(a);
    for_each_kquant_tile<kKqTileTokens512>(w, a, g0, g1, [&]<int NT>(const uint8_t* tiles, int64_t g, int64_t t) {
      const int64_t r = g * kKqRows;
      scales.set(tiles);
      const __mmask16 m = w.rows - r >= kKqRows ? __mmask16(0xFFFF) : __mmask16((1u << (w.rows - r)) - 1);
      kq_tile512<Q, NT>(tiles, scales, a, t, y + t * w.rows + r, w.rows, m);
    });
  });
}

}  // namespace ember::kernels::detail
