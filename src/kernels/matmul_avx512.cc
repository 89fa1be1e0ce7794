// AVX-512 kernels of quantized weights (F, BW, VL, VNNI, BF16); plain weights use the AVX2 panel
// kernel everywhere. This file alone is compiled with those flags and is only
// called when cpu.cc found them.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// One 16-row group x NT tokens. Lanes are rows: each vpdpbusd adds 4 consecutive products of each
// row, so a block's dot product needs 8 of them and no horizontal sums. Quants are made unsigned
// (q8: q + 128 by flipping the sign bit; q4: nibble = q + 8) and the accumulator starts at
// -offset * sum(x quants) to cancel the offset.
template <QType Q, int NT>
void quant_tile(const uint8_t* tiles, const uint16_t* scales, int64_t nb, const QuantizedActs& a, int64_t t0,
                float* y, int64_t ldy, __mmask16 rows_mask) {
  constexpr int32_t off = Q == QType::Q8_0 ? 128 : 8;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i wv[8];
    if constexpr (Q == QType::Q8_0) {
      const uint8_t* tile = tiles + b * 512;
      for (int j = 0; j < 8; ++j) wv[j] = _mm512_xor_si512(_mm512_loadu_si512(tile + j * 64), flip);
    } else {
      const uint8_t* tile = tiles + b * 256;
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(tile + j * 64);
        wv[j] = _mm512_and_si512(v, low4);
        wv[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
    }
    const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * 16)));
    for (int t = 0; t < NT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      const int8_t* xq = a.q.data() + (t0 + t) * a.cols + b * kQBlock;
      __m512i s = _mm512_set1_epi32(-off * a.s[tb]);
      for (int j = 0; j < 8; ++j) s = _mm512_dpbusd_epi32(s, wv[j], bcast4(xq + 4 * j));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sw, _mm512_set1_ps(a.d[tb])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows_mask, acc[t]);
}

template <QType Q>
void quant_groups(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  constexpr int kNT = 8;
  const int64_t nb = a.n_blocks, bb = qblock_bytes(Q);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  for (int64_t tb = 0; tb < a.n; tb += kTokenBlock) {
    const int64_t te = std::min(a.n, tb + kTokenBlock);
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r = g * kQGroupRows;
      const __mmask16 m = w.rows - r >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (w.rows - r)) - 1);
      const uint8_t* tiles = base + g * nb * bb;
      const uint16_t* sc = w.scales + g * nb * kQGroupRows;
      for (int64_t t = tb; t < te;) {
        const int64_t nt = std::min<int64_t>(kNT, te - t);
        float* yt = y + t * w.rows + r;
        switch (nt) {
          case 8: quant_tile<Q, 8>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 7: quant_tile<Q, 7>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 6: quant_tile<Q, 6>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 5: quant_tile<Q, 5>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 4: quant_tile<Q, 4>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 3: quant_tile<Q, 3>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          case 2: quant_tile<Q, 2>(tiles, sc, nb, a, t, yt, w.rows, m); break;
          default: quant_tile<Q, 1>(tiles, sc, nb, a, t, yt, w.rows, m); break;
        }
        t += nt;
      }
    }
  }
}

}  // namespace

void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, float* y, int64_t g0, int64_t g1) {
  if (w.qtype == QType::Q8_0) quant_groups<QType::Q8_0>(w, a, y, g0, g1);
  else quant_groups<QType::Q4_0>(w, a, y, g0, g1);
}

}  // namespace ember::kernels::detail
