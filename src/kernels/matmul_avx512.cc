// AVX-512 kernels of quantized weights; plain weights use the AVX2 panel kernel everywhere. Only
// this file is compiled with AVX-512 flags, exactly the features it uses (F, BW, VNNI: see
// CMakeLists.txt and cpu.h), and it is only called when cpu.cc found them.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

// Tokens per tile: NT accumulators plus the 8 weight vectors of a block stay in registers.
constexpr int kTileTokens512 = 8;
// Each vpdpbusd adds one unit (4 products) per row, so a block takes this many of them.
constexpr int kUnitsPerBlock = kQBlock / kQUnit;

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, kQUnit);
  return _mm512_set1_epi32(v);
}

// One 16-row group x NT tokens. Lanes are rows: each vpdpbusd adds 4 consecutive products of each
// row, so a block's dot product needs 8 of them and no horizontal sums. Quants are made unsigned
// (q8: q + 128 by flipping the sign bit; q4: nibble = q + 8) and the accumulator starts at
// -offset * sum(x quants) to cancel the offset.
template <QType Q, int NT>
void quant_tile512(const uint8_t* tiles, const uint16_t* scales, int64_t nb, const QuantizedActs& a, int64_t t0,
                   float* y, int64_t ldy, __mmask16 rows_mask) {
  static_assert(kQGroupRows == 16, "one zmm of int32 or float32 lanes holds a group's rows");
  constexpr int32_t off = quant_offset(Q);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = tiles + b * qblock_bytes(Q);
    __m512i wv[kUnitsPerBlock];
    if constexpr (Q == QType::Q8_0) {
      for (int j = 0; j < kUnitsPerBlock; ++j)
        wv[j] = _mm512_xor_si512(_mm512_loadu_si512(tile + j * kQUnitRowBytes), flip);
    } else {  // a byte's low nibbles are units [0, 4), its high nibbles units [4, 8)
      constexpr int half = kUnitsPerBlock / 2;
      for (int j = 0; j < half; ++j) {
        const __m512i v = _mm512_loadu_si512(tile + j * kQUnitRowBytes);
        wv[j] = _mm512_and_si512(v, low4);
        wv[j + half] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
    }
    const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * kQGroupRows)));
    for (int t = 0; t < NT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      const int8_t* xq = a.q.data() + (t0 + t) * a.cols + b * kQBlock;
      __m512i s = _mm512_set1_epi32(-off * a.s[tb]);
      for (int j = 0; j < kUnitsPerBlock; ++j) s = _mm512_dpbusd_epi32(s, wv[j], bcast4(xq + kQUnit * j));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sw, _mm512_set1_ps(a.d[tb])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows_mask, acc[t]);
}

template <QType Q>
void quant_groups512(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  const int64_t nb = a.n_blocks;
  for_each_group(w, a, g0, g1, [&](const uint8_t* tiles, const uint16_t* sc, int64_t g, int64_t t0, int64_t t1) {
    const int64_t r = g * kQGroupRows;
    const __mmask16 m = w.rows - r >= kQGroupRows ? __mmask16(0xFFFF) : __mmask16((1u << (w.rows - r)) - 1);
    static_assert(kTileTokens512 == 8, "the switch below has a case per tile size");
    for (int64_t t = t0; t < t1;) {
      const int64_t nt = std::min<int64_t>(kTileTokens512, t1 - t);
      float* yt = y + t * w.rows + r;
      switch (nt) {
        case 8: quant_tile512<Q, 8>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 7: quant_tile512<Q, 7>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 6: quant_tile512<Q, 6>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 5: quant_tile512<Q, 5>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 4: quant_tile512<Q, 4>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 3: quant_tile512<Q, 3>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        case 2: quant_tile512<Q, 2>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        default: quant_tile512<Q, 1>(tiles, sc, nb, a, t, yt, w.rows, m); break;
      }
      t += nt;
    }
  });
}

}  // namespace

void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  if (w.qtype == QType::Q8_0) quant_groups512<QType::Q8_0>(w, a, y, g0, g1);
  else quant_groups512<QType::Q4_0>(w, a, y, g0, g1);
}

}  // namespace ember::kernels::detail
