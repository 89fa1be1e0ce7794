// AVX2 kernels of K-quant weights (kquant.h) where AVX-512 is missing: as the AVX-512 ones
// (matmul_kquant_avx512.cc) with maddubs + madd for the 4-product lanes, 8-row halves of a group in
// ymm registers (kq_tile).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kquant_simd.h"
#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

constexpr int kKqTileTokens = 2;
constexpr int kKqHalfRows = 8;

// How many units' maddubs sums add up in 16 bits before they widen. A lane of one is at most
// 2 * 15 * 127 for Q4_K (activations lie in [-127, 127], so maddubs never saturates), and a
// sub-block's 8 stay within 32767; integer sums are exact, so the bits are those of widening every
// unit. Q5_K / Q6_K could add 4 / 2, but their extra sums cost registers the high bits need: widening
// each unit measured faster there (kernels_bench). Q2_K / Q3_K's sub-block of 4 units stays within
// 4 * 2 * 7 * 127, IQ3_S's 4 units within 4 * 2 * 31 * 127; IQ4_XS's signed values reach 2 * 127 * 127
// in one.
template <QType Q>
constexpr int kq_units_in_16_bits() {
  return Q == QType::Q4_K ? 8 : Q == QType::Q2_K || Q == QType::Q3_K || Q == QType::IQ3_S ? 4 : 1;
}

// A plane's fields of v moved to their bit (s: the byte-wise shift, positive left) under mask: a 16-bit
// shift moves whole fields, and what crosses into the other byte of the lane lies outside the mask.
inline __m256i kq_field256(__m256i v, int s, char mask) {
  const __m256i at = s >= 0 ? _mm256_slli_epi16(v, s) : _mm256_srli_epi16(v, -s);
  return _mm256_and_si256(at, _mm256_set1_epi8(mask));
}

// Unit u of sub-blocks 2p (lo) and 2p + 1 (hi), 8-row half h: their quants, unsigned, from the
// nibbles and bit planes the type has (kquant.h); IQ4_XS: its table's signed values (unsigned they
// would saturate maddubs), which kq_maddubs multiplies by the sign trick.
template <QType Q>
[[gnu::always_inline]] inline void kq_units256(const uint8_t* tile, int p, int u, int h, __m256i& lo, __m256i& hi) {
  auto load = [&](int64_t at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at + 32 * h)); };
  lo = hi = _mm256_setzero_si256();
  if constexpr (kq_has_nibbles(Q)) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i v = load(KqShape<Q>::kNibbles + kq_unit_offset(Q, p, u));
    lo = _mm256_and_si256(v, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
  if constexpr (kq_has_high_plane(Q)) {
    const __m256i hv = load(kq_high_block(Q, 2 * p, u));
    lo = _mm256_or_si256(lo, kq_field256(hv, kq_high_to_bit4<Q>(2 * p, u), kq_high_mask<Q>()));
    hi = _mm256_or_si256(hi, kq_field256(hv, kq_high_to_bit4<Q>(2 * p + 1, u), kq_high_mask<Q>()));
  }
  if constexpr (Q == QType::Q3_K) {
    const __m256i bv = load(kq3_bit2_block(2 * p, u));
    lo = _mm256_or_si256(lo, kq_field256(bv, kq3_bit2_to_bit2(2 * p, u), 0x04));
    hi = _mm256_or_si256(hi, kq_field256(bv, kq3_bit2_to_bit2(2 * p + 1, u), 0x04));
  }
  if constexpr (Q == QType::IQ4_XS) {
    const __m256i table = _mm256_load_si256(reinterpret_cast<const __m256i*>(kIq4Signed.b));
    lo = _mm256_shuffle_epi8(table, lo);
    hi = _mm256_shuffle_epi8(table, hi);
  }
  if constexpr (Q == QType::IQ3_S) {  // 8 rows' grid words gathered, then 16 +- each magnitude
    auto unit = [&](int n) {
      const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile + kKqS3Idx + 16 * n + 8 * h)));
      const int ninth = tile[kKqS3IdxHi + 2 * n + h];
      uint32_t signs;
      std::memcpy(&signs, tile + kKqS3Signs + 8 * n + 4 * h, 4);
      // Bit r of ninth to lane r, bit b of signs to byte b: all ones where set.
      const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
      const __m256i high = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(ninth), lane_bit), lane_bit);
      const __m256i index = _mm256_add_epi32(low, _mm256_and_si256(high, _mm256_set1_epi32(256)));
      const __m256i mag = _mm256_i32gather_epi32(kIq3sGridWords.w, index, 4);
      const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(signs)),
                                                 _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
      const __m256i byte_bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
      const __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread, byte_bit), byte_bit);
      const __m256i base = _mm256_set1_epi8(16);
      return _mm256_blendv_epi8(_mm256_add_epi8(base, mag), _mm256_sub_epi8(base, mag), negative);
    };
    lo = unit(8 * (2 * p) + u);
    hi = unit(8 * (2 * p + 1) + u);
  }
}

// Pairwise products w * x in 16 bits (IQ4_XS: |w| times x with w's sign).
template <QType Q>
inline __m256i kq_maddubs(__m256i w, __m256i x) {
  if constexpr (Q == QType::IQ4_XS) return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  else return _mm256_maddubs_epi16(w, x);
}

// Lane i: row 8h + i's pair of 16-bit scales (sub-blocks 2p, 2p + 1) and mins (Q3_K, Q6_K, IQ4_XS:
// the scales again; Q2_K: its scale bytes' high nibbles), from the tile's scale bytes `sc`
// (KqGroupScales::at).
template <QType Q>
inline __m256i kq_scale_pairs256(const uint8_t* sc, int p, int h);
template <QType Q>
inline __m256i kq_min_pairs256(const uint8_t* sc, int p, int h);

// Lane i of the result: row 8h + i's pair of 16-bit factors (sub-blocks 2p, 2p + 1) from the 8
// byte pairs at p (kq_pair_byte), signed for Q6_K's scales.
template <bool Signed>
inline __m256i kq_pairs256(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return Signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

template <QType Q>
inline __m256i kq_scale_pairs256(const uint8_t* sc, int p, int h) {
  const __m256i v = kq_pairs256<kq_signed_scales(Q)>(sc + 32 * p + 16 * h);
  return Q == QType::Q2_K ? _mm256_and_si256(v, _mm256_set1_epi16(0x0F)) : v;
}
template <QType Q>
inline __m256i kq_min_pairs256(const uint8_t* sc, int p, int h) {
  if constexpr (kq_signed_scales(Q)) return kq_scale_pairs256<Q>(sc, p, h);
  else if constexpr (Q == QType::Q2_K) return _mm256_srli_epi16(kq_pairs256<false>(sc + 32 * p + 16 * h), 4);
  else return kq_pairs256<false>(sc + kKqUnpackedMins + 32 * p + 16 * h);
}

// Sub-block pair p of super-block b for HP 8-row halves from h0 and NT tokens from t0: adds
// sum sc * (q . x) to isum. The 16-bit sums of a row are multiplied by its scale, repeated in both
// halves of the lane, as they widen: no float work per sub-block.
template <QType Q, int NT, int HP>
[[gnu::always_inline]] inline void kq_pair_sums(const uint8_t* tile, const uint8_t* sc_bytes, const KQuantActs& a,
                                                int64_t t0, int64_t b, int p, int h0, __m256i (&isum)[HP][NT]) {
  using S = KqShape<Q>;
  const __m256i dup_a = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i dup_b = _mm256_add_epi8(dup_a, _mm256_set1_epi8(2));
  __m256i sca[HP], scb[HP];
  #pragma GCC unroll 2
  for (int i = 0; i < HP; ++i) {
    const __m256i sc = kq_scale_pairs256<Q>(sc_bytes, p, h0 + i);
    sca[i] = _mm256_shuffle_epi8(sc, dup_a);
    scb[i] = _mm256_shuffle_epi8(sc, dup_b);
  }
  __m256i wa[HP][NT], wb[HP][NT];  // 16-bit sums of up to kq_units_in_16_bits units
  #pragma GCC unroll 2
  for (int i = 0; i < HP; ++i)
    #pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) wa[i][t] = wb[i][t] = _mm256_setzero_si256();
  #pragma GCC unroll 8  // so that each unit's high-bit shifts are constants
  for (int u = 0; u < S::kUnits; ++u) {
    __m256i xa[NT], xb[NT];
    #pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
      const int8_t* xq = a.q.data() + (t0 + t) * a.cols + b * kQK_K + 4 * u;
      xa[t] = _mm256_set1_epi32(kq_x4(xq + S::kWidth * 2 * p));
      xb[t] = _mm256_set1_epi32(kq_x4(xq + S::kWidth * (2 * p + 1)));
    }
    #pragma GCC unroll 2
    for (int i = 0; i < HP; ++i) {
      __m256i lo, hi;
      kq_units256<Q>(tile, p, u, h0 + i, lo, hi);
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        wa[i][t] = _mm256_add_epi16(wa[i][t], kq_maddubs<Q>(lo, xa[t]));
        wb[i][t] = _mm256_add_epi16(wb[i][t], kq_maddubs<Q>(hi, xb[t]));
        // GCC would compute all of a sub-block's products before adding any and spill them: an empty
        // asm keeps the additions in order (Q2_K, Q3_K, Q4_K; the others widen every unit).
        if constexpr (kq_units_in_16_bits<Q>() > 1) asm("" : "+x"(wa[i][t]), "+x"(wb[i][t]));
      }
    }
    if ((u + 1) % kq_units_in_16_bits<Q>() == 0) {
      #pragma GCC unroll 2
      for (int i = 0; i < HP; ++i)
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
          isum[i][t] = _mm256_add_epi32(isum[i][t], _mm256_add_epi32(_mm256_madd_epi16(wa[i][t], sca[i]),
                                                                     _mm256_madd_epi16(wb[i][t], scb[i])));
          wa[i][t] = wb[i][t] = _mm256_setzero_si256();
        }
    }
  }
}

// One group (16 rows) x NT tokens over all super-blocks, in passes of HP 8-row halves: one token
// takes both halves in one pass, so decode streams each tile from memory once; two tokens' sums fill
// the registers with one half, so they take two passes (the second finds the tiles cached). Per
// super-block the integer sums isum and msum (kquant_row_dot) are exact; they meet the floats once.
template <QType Q, int NT>
[[gnu::noinline]] void kq_tile(const uint8_t* tiles, const KqGroupScales<Q>& scales, const KQuantActs& a, int64_t t0,
                               float* y, int64_t ldy, int64_t valid_rows) {
  using S = KqShape<Q>;
  constexpr int HP = NT == 1 ? 2 : 1;
  const int64_t nb = a.n_blocks;
  for (int h0 = 0; h0 < 2 && kKqHalfRows * h0 < valid_rows; h0 += HP) {
    // Every loop over halves and tokens must unroll (GCC does not at -O2) or the sums live on the stack.
    __m256 acc[HP][NT];
    #pragma GCC unroll 2
    for (int i = 0; i < HP; ++i)
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) acc[i][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* tile = tiles + b * kq_tile_bytes(Q);
      alignas(32) uint8_t buf[KqGroupScales<Q>::kStride];
      const uint8_t* sc = scales.at(b, tile, buf);
      __m256i isum[HP][NT], msum[HP][NT];
      #pragma GCC unroll 2
      for (int i = 0; i < HP; ++i)
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) isum[i][t] = msum[i][t] = _mm256_setzero_si256();
      for (int p = 0; p < S::kPairs; ++p) {
        if (NT <= 2 && h0 == 0) kq_prefetch_ahead<Q>(tile, p);
        kq_pair_sums<Q, NT, HP>(tile, sc, a, t0, b, p, h0, isum);
        // msum: the pair's mins (Q3_K, Q6_K: scales) times the activations' sums, two per madd
        // (IQ4_XS: its signed values carry no offset).
        if constexpr (Q == QType::IQ4_XS) continue;
        #pragma GCC unroll 2
        for (int i = 0; i < HP; ++i) {
          const __m256i m = kq_min_pairs256<Q>(sc, p, h0 + i);
          #pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            const int32_t sums = kq_act_sum_pair<Q>(a, (t0 + t) * nb + b, p);
            msum[i][t] = _mm256_add_epi32(msum[i][t], _mm256_madd_epi16(m, _mm256_set1_epi32(sums)));
          }
        }
      }
      #pragma GCC unroll 2
      for (int i = 0; i < HP; ++i) {
        const int h = h0 + i;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kKqD + 16 * h)));
        // The mins' factor: dmin, or Q3_K / Q6_K's 4 / 32 * d (the offset times the scales).
        const __m256 dm = kq_has_dmin(Q) ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kKqDmin + 16 * h)))
                                         : _mm256_mul_ps(d, _mm256_set1_ps(static_cast<float>(kq_offset(Q))));
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
          const __m256 dx = _mm256_set1_ps(a.d[(t0 + t) * nb + b]);
          acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][t]), _mm256_mul_ps(d, dx), acc[i][t]);
          if constexpr (Q != QType::IQ4_XS)
            acc[i][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[i][t]), _mm256_mul_ps(dm, dx), acc[i][t]);
        }
      }
    }
    #pragma GCC unroll 2
    for (int i = 0; i < HP; ++i) {
      const int64_t n = std::min<int64_t>(kKqHalfRows, valid_rows - kKqHalfRows * (h0 + i));
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        alignas(__m256) float out[kKqHalfRows];
        _mm256_store_ps(out, acc[i][t]);
        std::copy_n(out, std::max<int64_t>(0, n), y + t * ldy + kKqHalfRows * (h0 + i));
      }
    }
  }
}

}  // namespace

void kquant_groups_avx2(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t g0, int64_t g1) {
  with_kquant_type(w.qtype, [&]<QType Q>() {
    KqGroupScales<Q> scales(a);
    for_each_kquant_tile<kKqTileTokens>(w, a, g0, g1, [&]<int NT>(const uint8_t* tiles, int64_t g, int64_t t) {
      const int64_t r = g * kKqRows;
      scales.set(tiles);
      kq_tile<Q, NT>(tiles, scales, a, t, y + t * w.rows + r, w.rows, std::min(kKqRows, w.rows - r));
    });
  });
}

}  // namespace ember::kernels::detail
