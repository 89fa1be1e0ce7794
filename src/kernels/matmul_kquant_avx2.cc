// AVX2 kernels of K-quant weights (kquant.h) where AVX-512 is missing: each row's super-blocks are
// unpacked 32 weights at a time into unsigned bytes and multiplied with the Q8_K activations of a
// tile of tokens (maddubs, then madd with the sub-block scales), so one unpacking serves every token
// of the tile.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kquant_simd.h"
#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

// Tokens per tile: NT float and NT integer accumulators plus the unpacked weights fit the 16 registers.
constexpr int kKqTileTokens = 4;

inline float kq_hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i kq_load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Bit j of a 32-bit mask as 16 (the fifth bit of a Q5_K quant) in byte j.
inline __m256i kq_bits_to_16(const uint8_t* p) {
  uint32_t m;
  std::memcpy(&m, p, 4);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)),
                                            _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
}

// One row x NT tokens over all super-blocks. Chunk c holds weights [32c, 32c + 32) of a super-block.
template <QType Q, int NT>
[[gnu::noinline]] void kq_tile(const uint8_t* row, const KQuantActs& a, int64_t t0, float* y, int64_t ldy) {
  constexpr int64_t bb = kq_block_bytes(Q);
  const int64_t nb = a.n_blocks;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  #pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    __m256i isum[NT];
    #pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    // Adds the products of chunk c (unsigned weights wq, int16 scales of its two 16-halves sc).
    auto chunk = [&](int c, __m256i wq, __m256i sc) {
      #pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i xq = kq_load256(a.q.data() + (t0 + t) * a.cols + b * kQK_K + 32 * c);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xq), sc));
      }
    };
    const uint8_t* qs = blk + (Q == QType::Q6_K ? kKq6Ql : kKqQs);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
      #pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {
        const __m256i v = kq_load256(qs + 64 * h + 32 * p);
        __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        const int clo = 4 * h + p, chi = 4 * h + 2 + p;  // the chunks of the low and high nibbles
        if constexpr (Q == QType::Q6_K) {
          // Bits 4-5 of chunk c: bits 2(c/2) of qh bytes 32(c%2)...
          const __m256i qh = kq_load256(blk + kKq6Qh + 32 * p);
          const __m256i three = _mm256_set1_epi8(3);
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * (clo / 2)), three), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * (chi / 2)), three), 4));
          const auto* sc = reinterpret_cast<const int8_t*>(blk + kKq6Scales);
          chunk(clo, lo, _mm256_set_m128i(_mm_set1_epi16(sc[2 * clo + 1]), _mm_set1_epi16(sc[2 * clo])));
          chunk(chi, hi, _mm256_set_m128i(_mm_set1_epi16(sc[2 * chi + 1]), _mm_set1_epi16(sc[2 * chi])));
        } else {
          if constexpr (Q == QType::Q5_K) {
            lo = _mm256_or_si256(lo, kq_bits_to_16(blk + kKq5Qh + 4 * clo));
            hi = _mm256_or_si256(hi, kq_bits_to_16(blk + kKq5Qh + 4 * chi));
          }
          chunk(clo, lo, _mm256_set1_epi16(blk[kKqScales + clo]));
          chunk(chi, hi, _mm256_set1_epi16(blk[kKqScales + chi]));
        }
      }
    const auto [d, dm] = kq_factors<Q>(blk);
    const __m256i mw = kq_min_weights<Q>(blk);
    #pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      const float dx = a.d[tb];
      const __m256i ms = kq_min_sums(mw, a, tb);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(dm * dx), acc[t]);
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) y[t * ldy] = kq_hsum256(acc[t]);
}

}  // namespace

void kquant_rows_avx2(const WeightMatrix& w, const KQuantActs& a, float* y, int64_t r0, int64_t r1) {
  with_kquant_type(w.qtype, [&]<QType Q>() {
    for_each_kquant_tile<kKqTileTokens>(w, a, r0, r1, [&]<int NT>(const uint8_t* row, int64_t r, int64_t t) {
      kq_tile<Q, NT>(row, a, t, y + t * w.rows + r, w.rows);
    });
  });
}

}  // namespace ember::kernels::detail
