// AVX2 kernels of K-quant weights (kquant.h) where AVX-512 is missing: as the AVX-512 ones
// (matmul_kquant_avx512.cc) with maddubs + madd for the 4-product lanes, 8-row halves of a group in
// ymm registers (kq_tile).
#include <immintrin.h>

#include <algorithm>

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
// each unit measured faster there (kernels_bench).
template <QType Q>
constexpr int kq_units_in_16_bits() { return Q == QType::Q4_K ? 8 : 1; }

// The nibbles q of unit u of sub-block j with their high bits, from the high vector hv (the same
// 8-row half): a 16-bit shift moves whole fields to bit 4 of their own byte, and what crosses into
// the other byte of the lane lies outside the mask.
template <QType Q>
inline __m256i kq_add_high256(__m256i q, __m256i hv, int j, int u) {
  const int s = kq_high_to_bit4<Q>(j, u);
  const __m256i at4 = s >= 0 ? _mm256_slli_epi16(hv, s) : _mm256_srli_epi16(hv, -s);
  return _mm256_or_si256(q, _mm256_and_si256(at4, _mm256_set1_epi8(kq_high_mask<Q>())));
}

// Lane i of the result: row 8h + i's pair of 16-bit factors (sub-blocks 2p, 2p + 1) from the 8
// byte pairs at p (kq_pair_byte), signed for Q6_K's scales.
template <bool Signed>
inline __m256i kq_pairs256(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return Signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

// Sub-block pair p of super-block b for HP 8-row halves from h0 and NT tokens from t0: adds
// sum sc * (q . x) to isum. The 16-bit sums of a row are multiplied by its scale, repeated in both
// halves of the lane, as they widen: no float work per sub-block.
template <QType Q, int NT, int HP>
[[gnu::always_inline]] inline void kq_pair_sums(const uint8_t* tile, const KQuantActs& a, int64_t t0, int64_t b, int p,
                                                int h0, __m256i (&isum)[HP][NT]) {
  using S = KqShape<Q>;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i dup_a = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i dup_b = _mm256_add_epi8(dup_a, _mm256_set1_epi8(2));
  __m256i sca[HP], scb[HP];
  #pragma GCC unroll 2
  for (int i = 0; i < HP; ++i) {
    const __m256i sc = kq_pairs256<Q == QType::Q6_K>(tile + S::kScales + 32 * p + 16 * (h0 + i));
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
      const int h = h0 + i;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + S::kNibbles + kq_unit_offset(Q, p, u) + 32 * h));
      __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (Q != QType::Q4_K) {
        const __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kq_high_block(Q, 2 * p, u) + 32 * h));
        lo = kq_add_high256<Q>(lo, hv, 2 * p, u);
        hi = kq_add_high256<Q>(hi, hv, 2 * p + 1, u);
      }
      #pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        wa[i][t] = _mm256_add_epi16(wa[i][t], _mm256_maddubs_epi16(lo, xa[t]));
        wb[i][t] = _mm256_add_epi16(wb[i][t], _mm256_maddubs_epi16(hi, xb[t]));
        // GCC would compute all of a sub-block's products before adding any and spill them: an empty
        // asm keeps the additions in order (Q4_K; the others widen every unit).
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

// Decode streams the weights from memory once (a second pass finds them cached): one core keeps too
// few reads in flight to reach the bandwidth while it computes, so a few super-blocks ahead are
// fetched, pair p's share of the tile's lines (prefetches past the end do not fault).
template <QType Q>
[[gnu::always_inline]] inline void kq_prefetch_ahead(const uint8_t* tile, int p) {
  constexpr int64_t kLines = (kq_tile_bytes(Q) + kCacheLine - 1) / kCacheLine + 1;  // +1: tiles need not be aligned
  constexpr int kPerPair = static_cast<int>((kLines + KqShape<Q>::kPairs - 1) / KqShape<Q>::kPairs);
  const uint8_t* at = tile + kDecodePrefetchAhead + kCacheLine * kPerPair * p;
  #pragma GCC unroll 16
  for (int l = 0; l < kPerPair; ++l) _mm_prefetch(reinterpret_cast<const char*>(at + kCacheLine * l), _MM_HINT_T0);
}

// One group (16 rows) x NT tokens over all super-blocks, in passes of HP 8-row halves: one token
// takes both halves in one pass, so decode streams each tile from memory once; two tokens' sums fill
// the registers with one half, so they take two passes (the second finds the tiles cached). Per
// super-block the integer sums isum and msum (kquant_row_dot) are exact; they meet the floats once.
template <QType Q, int NT>
[[gnu::noinline]] void kq_tile(const uint8_t* tiles, const KQuantActs& a, int64_t t0, float* y, int64_t ldy,
                               int64_t valid_rows) {
  using S = KqShape<Q>;
  constexpr int HP = NT == 1 ? 2 : 1;
  constexpr bool kSix = Q == QType::Q6_K;
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
      __m256i isum[HP][NT], msum[HP][NT];
      #pragma GCC unroll 2
      for (int i = 0; i < HP; ++i)
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) isum[i][t] = msum[i][t] = _mm256_setzero_si256();
      for (int p = 0; p < S::kPairs; ++p) {
        if (NT <= 2 && h0 == 0) kq_prefetch_ahead<Q>(tile, p);
        kq_pair_sums<Q, NT, HP>(tile, a, t0, b, p, h0, isum);
        // msum: the pair's mins (Q6_K: scales) times the activations' sums, two per madd.
        #pragma GCC unroll 2
        for (int i = 0; i < HP; ++i) {
          const __m256i m = kq_pairs256<kSix>(tile + (kSix ? kKq6Sc : kKqMin) + 32 * p + 16 * (h0 + i));
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
        // The mins' factor: dmin, or Q6_K's 32 * d (its offset 32 times its scales).
        const __m256 dm = kSix ? _mm256_mul_ps(d, _mm256_set1_ps(32.0f))
                               : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kKqDmin + 16 * h)));
        #pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
          const __m256 dx = _mm256_set1_ps(a.d[(t0 + t) * nb + b]);
          acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][t]), _mm256_mul_ps(d, dx), acc[i][t]);
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
    for_each_kquant_tile<kKqTileTokens>(w, a, g0, g1, [&]<int NT>(const uint8_t* tiles, int64_t g, int64_t t) {
      const int64_t r = g * kKqRows;
      kq_tile<Q, NT>(tiles, a, t, y + t * w.rows + r, w.rows, std::min(kKqRows, w.rows - r));
    });
  });
}

}  // namespace ember::kernels::detail
