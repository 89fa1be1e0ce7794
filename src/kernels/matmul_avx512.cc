// AVX-512 kernels of quantized weights (plain weights: matmul_panel_avx512.cc). Only
// this file is compiled with AVX-512 flags, exactly the features it uses (F, BW, VNNI: see
// CMakeLists.txt and cpu.h), and it is only called when cpu.cc found them.
#include "kernels/avx512_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

namespace {

// Tokens per tile: 2 x NT accumulators (a block's integer sums, the float sums) plus a weight vector
// stay in the 32 registers.
constexpr int kTileTokens512 = 12;
// Each vpdpbusd adds one unit (4 products) per row, so a block takes this many of them.
constexpr int kUnitsPerBlock = kQBlock / kQUnit;

// A tile's activations repacked so that the kernel reads them at fixed offsets from one pointer
// (12 token rows would need 12 address registers, which spilled) and every broadcast, the offset
// start's too, is a plain load (vpbroadcastd m32: no shuffle-port uop). Per block of a tile of nt
// tokens: each token's 32 quants, then per token the accumulator's start -offset * sum(x quants)
// (types with a min: the sum itself, which the min multiplies), then the activation scale's float bits.
constexpr int64_t kPackedPerToken = kUnitsPerBlock + 2;  // int32s per token and block

// A table type's values + 128 (unsigned) in each 128-bit lane, for vpshufb (one load: GCC 12's
// _mm512_broadcast_i32x4 warns of its own undefined operand).
template <QType Q>
inline __m512i table512() {
  alignas(64) uint8_t t[64];
  for (int i = 0; i < 64; ++i) t[i] = static_cast<uint8_t>(qtable_value(Q, i % 16) + 128);
  return _mm512_load_si512(t);
}

// The 16 rows' scales of a block as float32: float16, or MXFP4's E8M0 bytes as e8m0_half_to_f32
// computes them (2^(e - 128): exponent e - 1, or a subnormal for e < 2).
template <QType Q>
inline __m512 block_scales512(const uint16_t* sc) {
  if constexpr (qhas_e8m0_scale(Q)) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(_mm512_set1_epi32(2), e), normal, tiny));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc)));
  }
}

// Unit j of a block's weights, unsigned: v + quant_offset (Q8_0: by flipping the sign bit; the
// nibble types: a byte's low nibbles are units [0, 4), its high nibbles units [4, 8), with Q5_0 /
// Q5_1's fifth bits (bit j of their block, shifted to bit 4 in 16-bit lanes: what crosses into the
// other byte is masked off); IQ4_NL, MXFP4: their table looked up).
template <QType Q>
inline __m512i weight_unit(const uint8_t* tile, int j, __m512i table) {
  if constexpr (Q == QType::Q8_0) {
    return _mm512_xor_si512(_mm512_loadu_si512(tile + j * kQUnitRowBytes), _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    constexpr int half = kUnitsPerBlock / 2;
    const __m512i v = _mm512_loadu_si512(tile + (j % half) * kQUnitRowBytes);
    __m512i q = _mm512_and_si512(j < half ? v : _mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
    if constexpr (qhas_fifth_bits(Q)) {
      const __m512i h = _mm512_loadu_si512(tile + kQNibbleBytes);
      const __m512i at4 = j <= 4 ? _mm512_slli_epi16(h, static_cast<unsigned>(4 - j)) : _mm512_srli_epi16(h, static_cast<unsigned>(j - 4));
      q = _mm512_or_si512(q, _mm512_and_si512(at4, _mm512_set1_epi8(0x10)));
    }
    if constexpr (qhas_table(Q)) q = _mm512_shuffle_epi8(table, q);
    return q;
  }
}

// One 16-row group x NT tokens. Lanes are rows: each vpdpbusd adds 4 consecutive products of each
// row, so a block's dot product needs 8 of them and no horizontal sums. The accumulator starts at
// -offset * sum(x quants) to cancel the unsigned offset. Units are the outer loop so that the NT
// tokens' sums are independent chains (one chain of 8 would wait on vpdpbusd's latency); every token
// still sums its block in unit order and scales it as one fmadd, whatever NT is.
template <QType Q, int NT>
void quant_tile512(const uint8_t* tiles, const uint16_t* scales, int64_t nb, const int32_t* xp, float* y, int64_t ldy,
                   __mmask16 rows_mask) {
  static_assert(kQGroupRows == 16, "one zmm of int32 or float32 lanes holds a group's rows");
  __m512 acc[NT];
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i table = qhas_table(Q) ? table512<Q>() : _mm512_setzero_si512();
  for (int64_t b = 0; b < nb; ++b, xp += NT * kPackedPerToken) {
    const uint8_t* tile = tiles + b * qblock_bytes(Q);
    // Decode streams the weights from memory once: one core keeps too few reads in flight to reach
    // the bandwidth while it computes, so some blocks ahead are fetched (past the group's end is
    // the next group's, or harmless: prefetches do not fault).
    if constexpr (NT <= 2)
      for (int64_t l = 0; l < qblock_bytes(Q); l += kCacheLine)
        _mm_prefetch(reinterpret_cast<const char*>(tile + kDecodePrefetchAhead + l), _MM_HINT_T0);
    __m512i s[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) s[t] = qhas_min(Q) ? _mm512_setzero_si512() : _mm512_set1_epi32(xp[kUnitsPerBlock * NT + t]);
    #pragma GCC unroll 8
    for (int j = 0; j < kUnitsPerBlock; ++j) {
      const __m512i wv = weight_unit<Q>(tile, j, table);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) s[t] = _mm512_dpbusd_epi32(s[t], wv, _mm512_set1_epi32(xp[t * kUnitsPerBlock + j]));
    }
    const uint16_t* sc = scales + b * qscale_stride(Q);
    const __m512 sw = block_scales512<Q>(sc);
    const auto* xd = reinterpret_cast<const float*>(xp + (kUnitsPerBlock + 1) * NT);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(sw, _mm512_set1_ps(xd[t])), acc[t]);
    if constexpr (qhas_min(Q)) {  // + min * (sum of the block's activation quants) * their scale
      const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + kQGroupRows)));
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(xp[kUnitsPerBlock * NT + t])),
                                 _mm512_mul_ps(mw, _mm512_set1_ps(xd[t])), acc[t]);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows_mask, acc[t]);
}

template <QType Q>
void quant_groups512(const WeightMatrix& w, const QuantizedActs& a, const int32_t* xp, float* y, int64_t g0,
                     int64_t g1) {
  const int64_t nb = a.n_blocks;
  for_each_group(w, a, g0, g1, [&](const uint8_t* tiles, const uint16_t* sc, int64_t g, int64_t t0, int64_t t1) {
    const int64_t r = g * kQGroupRows;
    const __mmask16 m = w.rows - r >= kQGroupRows ? __mmask16(0xFFFF) : __mmask16((1u << (w.rows - r)) - 1);
    for (int64_t t = t0; t < t1; t += kTileTokens512)
      with_tile_size<kTileTokens512>(std::min<int64_t>(kTileTokens512, t1 - t), [&]<int NT>() {
        quant_tile512<Q, NT>(tiles, sc, nb, xp + t * nb * kPackedPerToken, y + t * w.rows + r, w.rows, m);
      });
  });
}

}  // namespace

int64_t quant_pack_size(const QuantizedActs& a) { return a.n * a.n_blocks * kPackedPerToken; }

int64_t quant_pack_tiles(const QuantizedActs& a) {
  int64_t tiles = 0;
  for_each_token_tile(a.n, kTileTokens512, [&](int64_t, int64_t) { ++tiles; });
  return tiles;
}

// The packed tile of tokens [t, t + nt) starts at t * n_blocks * kPackedPerToken: tiles lie in token order.
void pack_quant_acts(QType q, const QuantizedActs& a, int32_t* xp, int64_t i0, int64_t i1) {
  const int64_t nb = a.n_blocks;
  const int32_t offset = quant_offset(q);
  int64_t i = -1;  // the tile's index
  for_each_token_tile(a.n, kTileTokens512, [&](int64_t t0, int64_t nt) {
    if (++i < i0 || i >= i1) return;
    int32_t* tile = xp + t0 * nb * kPackedPerToken;
    for (int64_t t = 0; t < nt; ++t) {
      const int8_t* xq = a.q.data() + (t0 + t) * a.cols;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t* blk = tile + b * nt * kPackedPerToken;
        std::memcpy(blk + t * kUnitsPerBlock, xq + b * kQBlock, kQBlock);
        blk[kUnitsPerBlock * nt + t] = qhas_min(q) ? a.s[(t0 + t) * nb + b] : -offset * a.s[(t0 + t) * nb + b];
        std::memcpy(blk + (kUnitsPerBlock + 1) * nt + t, &a.d[(t0 + t) * nb + b], sizeof(float));
      }
    }
  });
}

void quant_groups_avx512(const WeightMatrix& w, const QuantizedActs& a, const int32_t* xp, float* y, int64_t g0,
                         int64_t g1) {
  with_block32_type(w.qtype, [&]<QType Q>() { quant_groups512<Q>(w, a, xp, y, g0, g1); });
}

}  // namespace ember::kernels::detail
