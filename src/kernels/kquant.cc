#include "kernels/kquant.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "base/dtype.h"
#include "kernels/iq3s_grid.h"
#include "kernels/matmul_impl.h"
#include "kernels/simd_avx2.h"

namespace ember::kernels {

namespace {

// One super-block decoded: unsigned quants, the scale and min of each sub-block (Q6_K: min = 32 *
// scale, so that weight = d * (sc * q - m) for every type) and the float16 bits of d and dmin.
struct KqParts {
  uint8_t q[kQK_K];
  int sc[16], m[16];
  int sub = 32;  // weights per sub-block
  uint16_t d = 0, dmin = 0;
};

uint16_t kq_load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void kq_store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// Packed 6-bit field f of row i (kquant.h): put into a zeroed tile, and read back (unsigned).
void kq_put_field(QType q, uint8_t* tile, int f, int64_t i, int v) {
  uint8_t* base = tile + kq_scales(q);
  base[kq_field_lo(f, i)] |= static_cast<uint8_t>((v & 0x0F) << (4 * (f % 2)));
  base[kq_field_hi(q, f, i)] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (f % 4)));
}
int kq_get_field(QType q, const uint8_t* tile, int f, int64_t i) {
  const uint8_t* base = tile + kq_scales(q);
  return ((base[kq_field_lo(f, i)] >> (4 * (f % 2))) & 0x0F) | (((base[kq_field_hi(q, f, i)] >> (2 * (f % 4))) & 3) << 4);
}

// Quant e of row i in a tile (zeroed before the first put), through its nibble and bit planes.
template <QType Q>
void kq_put_quant(uint8_t* tile, int64_t i, int e, int v) {
  constexpr int w = kq_sub_width(Q);
  const int j = e / w, u = (e % w) / 4, k = e % 4;
  if constexpr (kq_has_nibbles(Q)) tile[kq_nibbles(Q) + kq_unit_offset(Q, j / 2, u) + 4 * i + k] |= static_cast<uint8_t>((v & 0x0F) << (j % 2 ? 4 : 0));
  if constexpr (Q == QType::Q5_K || Q == QType::Q6_K)
    tile[kq_high_block(Q, j, u) + 4 * i + k] |= static_cast<uint8_t>(((v >> 4) & ((1 << kq_high_bits(Q)) - 1)) << kq_high_shift(Q, j, u));
  if constexpr (Q == QType::Q2_K || Q == QType::Q3_K) tile[kq_high_block(Q, j, u) + 4 * i + k] |= static_cast<uint8_t>((v & 3) << kq_high_shift(Q, j, u));
  if constexpr (Q == QType::Q3_K) tile[kq3_bit2_block(j, u) + 4 * i + k] |= static_cast<uint8_t>(((v >> 2) & 1) << kq3_bit2_shift(j, u));
}

template <QType Q>
int kq_get_quant(const uint8_t* tile, int64_t i, int e) {
  constexpr int w = kq_sub_width(Q);
  const int j = e / w, u = (e % w) / 4, k = e % 4;
  int v = 0;
  if constexpr (kq_has_nibbles(Q)) v = (tile[kq_nibbles(Q) + kq_unit_offset(Q, j / 2, u) + 4 * i + k] >> (j % 2 ? 4 : 0)) & 0x0F;
  if constexpr (Q == QType::Q5_K || Q == QType::Q6_K)
    v |= ((tile[kq_high_block(Q, j, u) + 4 * i + k] >> kq_high_shift(Q, j, u)) & ((1 << kq_high_bits(Q)) - 1)) << 4;
  if constexpr (Q == QType::Q2_K || Q == QType::Q3_K) v = (tile[kq_high_block(Q, j, u) + 4 * i + k] >> kq_high_shift(Q, j, u)) & 3;
  if constexpr (Q == QType::Q3_K) v |= ((tile[kq3_bit2_block(j, u) + 4 * i + k] >> kq3_bit2_shift(j, u)) & 1) << 2;
  if constexpr (Q == QType::IQ3_S) {  // 16 +- the grid magnitude
    const int n = e / 4;
    const int index = tile[kKqS3Idx + 16 * n + i] | (((kq_load_u16(tile + kKqS3IdxHi + 2 * n) >> i) & 1) << 8);
    const int mag = iq3s_magnitude(index, k);
    v = (tile[kKqS3Signs + 8 * n + (4 * i + k) / 8] >> ((4 * i + k) % 8)) & 1 ? 16 - mag : 16 + mag;
  }
  return v;
}

// Row i of a Q4_K tile from parts (what quantize_q4_k_row makes).
void kq_q4_k_parts_to_ember(const KqParts& p, uint8_t* tile, int64_t i) {
  kq_store_u16(tile + kKqD + 2 * i, p.d);
  kq_store_u16(tile + kKqDmin + 2 * i, p.dmin);
  for (int j = 0; j < 8; ++j) {
    kq_put_field(QType::Q4_K, tile, j, i, p.sc[j]);
    kq_put_field(QType::Q4_K, tile, 8 + j, i, p.m[j]);
  }
  for (int pair = 0; pair < 4; ++pair)
    for (int u = 0; u < 8; ++u)
      for (int k = 0; k < 4; ++k) {
        const int e = 64 * pair + 4 * u + k;
        tile[kKqNibbles + kq_unit_offset(QType::Q4_K, pair, u) + 4 * i + k] = static_cast<uint8_t>((p.q[e] & 0x0F) | ((p.q[e + 32] & 0x0F) << 4));
      }
}

uint32_t kq_load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One ggml super-block (layouts in gguf_quants.cc) into row i of a tile (zeroed), 4 quants (one
// unit's bytes of a row) at a time: a model's load repacks every weight.
template <QType q>
void kq_repack_row(const uint8_t* in, uint8_t* tile, int64_t i) {
  constexpr int w = kq_sub_width(q), units = w / 4;
  constexpr int64_t first_high = kq_high_block(q, 0, 0);
  uint32_t high[q == QType::Q5_K || q == QType::Q6_K ? (kq_tile_bytes(q) - first_high) / 64 : 1] = {};  // row i's word of each block
  // Adds unit u of sub-block j's high bits, one field per byte of `bits` at bit 0.
  auto add_high = [&](int j, int u, uint32_t bits) { high[(kq_high_block(q, j, u) - first_high) / 64] |= bits << kq_high_shift(q, j, u); };
  if constexpr (q == QType::Q2_K) {  // layouts in gguf_quants.cc
    std::memcpy(tile + kKqD + 2 * i, in + 80, 2);
    std::memcpy(tile + kKqDmin + 2 * i, in + 82, 2);
    for (int j = 0; j < 16; ++j) tile[kKq2Sc + kq_pair_byte(j, i)] = in[j];  // scale | min << 4, as stored
    for (int e = 0; e < kQK_K; ++e) kq_put_quant<q>(tile, i, e, (in[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
  } else if constexpr (q == QType::Q3_K) {
    const uint8_t* sc = in + 96;
    std::memcpy(tile + kKqD + 2 * i, in + 108, 2);
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (sc[j] & 0x0F) : (sc[j - 8] >> 4), high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
      kq_put_field(q, tile, j, i, low | (high << 4));  // the scale less 32
    }
    // q - 4 is ggml's quant: its low 2 bits, less 4 where the high bit is clear.
    for (int e = 0; e < kQK_K; ++e) {
      const int low = (in[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3, high = (in[e % 32] >> (e / 32)) & 1;
      kq_put_quant<q>(tile, i, e, low | (high << 2));
    }
  } else if constexpr (q == QType::IQ3_S) {  // layout in gguf_quants.cc
    std::memcpy(tile + kKqD + 2 * i, in, 2);
    for (int j = 0; j < 8; ++j) tile[kKqS3Sc + kq_pair_byte(j, i)] = static_cast<uint8_t>(1 + 2 * ((in[106 + j / 2] >> (4 * (j % 2))) & 0x0F));
    for (int n = 0; n < 64; ++n) {  // index n: elements 4n..4n+3
      tile[kKqS3Idx + 16 * n + i] = in[2 + n];
      tile[kKqS3IdxHi + 2 * n + i / 8] |= static_cast<uint8_t>(((in[66 + n / 8] >> (n % 8)) & 1) << (i % 8));
      for (int k = 0; k < 4; ++k) {
        const int e = 4 * n + k, bit = 4 * static_cast<int>(i) + k;
        tile[kKqS3Signs + 8 * n + bit / 8] |= static_cast<uint8_t>(((in[74 + e / 8] >> (e % 8)) & 1) << (bit % 8));
      }
    }
  } else if constexpr (q == QType::IQ4_XS) {
    std::memcpy(tile + kKqD + 2 * i, in, 2);
    const int high = in[2] | (in[3] << 8);
    for (int j = 0; j < 8; ++j) {
      const int ls = ((in[4 + j / 2] >> (4 * (j % 2))) & 0x0F) | (((high >> (2 * j)) & 3) << 4);
      kq_put_field(q, tile, j, i, ls);  // the scale less 32
    }
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t b = in[8 + 16 * (e / 32) + e % 16];
      kq_put_quant<q>(tile, i, e, e % 32 < 16 ? (b & 0x0F) : (b >> 4));
    }
  } else if constexpr (q == QType::Q6_K) {
    const uint8_t* ql = in;
    const uint8_t* qh = in + 128;
    std::memcpy(tile + kKqD + 2 * i, in + 208, 2);
    for (int j = 0; j < 16; ++j) tile[kKq6Sc + kq_pair_byte(j, i)] = in[192 + j];
    // Element e = 32 p + l (l < 32) of a super-block: half p / 4, nibble (p % 4 < 2 ? low : high) of
    // ql[64 * half + 32 * (p % 2) + l], bits 2 (p % 4) of qh[32 * half + l]. Pair p is sub-blocks 2p
    // (l < 16) and 2p + 1.
    for (int p = 0; p < 8; ++p)
      for (int u = 0; u < units; ++u) {
        const int half = p / 4, nib_shift = 4 * ((p % 4) / 2), high_shift = 2 * (p % 4);
        const uint8_t* lo = ql + 64 * half + 32 * (p % 2) + 4 * u;
        const uint32_t a = (kq_load_u32(lo) >> nib_shift) & 0x0F0F0F0F, b = (kq_load_u32(lo + 16) >> nib_shift) & 0x0F0F0F0F;
        const uint32_t nibbles = a | (b << 4);
        std::memcpy(tile + kKq6Nibbles + kq_unit_offset(q, p, u) + 4 * i, &nibbles, 4);
        add_high(2 * p, u, (kq_load_u32(qh + 32 * half + 4 * u) >> high_shift) & 0x03030303);
        add_high(2 * p + 1, u, (kq_load_u32(qh + 32 * half + 16 + 4 * u) >> high_shift) & 0x03030303);
      }
  } else {
    std::memcpy(tile + kKqD + 2 * i, in, 2);
    std::memcpy(tile + kKqDmin + 2 * i, in + 2, 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      kquant_scale_min(j, in + 4, sc, m);
      kq_put_field(q, tile, j, i, sc);
      kq_put_field(q, tile, 8 + j, i, m);
    }
    // Byte 32 p + l of the quants holds element 64 p + l in its low nibble and 64 p + 32 + l in its
    // high one: Ember's nibble byte of pair p, unit u, as it is.
    const uint8_t* qs = in + (q == QType::Q5_K ? 48 : 16);
    for (int p = 0; p < 4; ++p)
      for (int u = 0; u < units; ++u) std::memcpy(tile + kKqNibbles + kq_unit_offset(q, p, u) + 4 * i, qs + 32 * p + 4 * u, 4);
    if constexpr (q == QType::Q5_K) {  // bit j of qh[l]: element 32 j + l's bit 4
      const uint8_t* qh = in + 16;
      for (int j = 0; j < 8; ++j)
        for (int u = 0; u < units; ++u) add_high(j, u, (kq_load_u32(qh + 4 * u) >> j) & 0x01010101);
    }
  }
  if constexpr (q == QType::Q5_K || q == QType::Q6_K)
    for (size_t b = 0; b < std::size(high); ++b) std::memcpy(tile + first_high + 64 * static_cast<int64_t>(b) + 4 * i, &high[b], 4);
}

// Row i of a tile to parts.
template <QType q>
void kq_parts_from_ember_t(const uint8_t* tile, int64_t i, KqParts& p) {
  p.sub = kq_sub_width(q);
  p.d = kq_load_u16(tile + kKqD + 2 * i);
  p.dmin = kq_has_dmin(q) ? kq_load_u16(tile + kKqDmin + 2 * i) : 0;
  for (int j = 0; j < kQK_K / p.sub; ++j) {
    if constexpr (kq_packed_fields(q)) {
      p.sc[j] = kq_get_field(q, tile, j, i) - (kq_signed_scales(q) ? 32 : 0);
      p.m[j] = kq_has_dmin(q) ? kq_get_field(q, tile, 8 + j, i) : kq_offset(q) * p.sc[j];
      continue;
    }
    const uint8_t b = tile[kq_scales(q) + kq_pair_byte(j, i)];
    if constexpr (kq_signed_scales(q)) {
      p.sc[j] = static_cast<int8_t>(b);
      p.m[j] = kq_offset(q) * p.sc[j];
    } else if constexpr (q == QType::Q2_K) {
      p.sc[j] = b & 0x0F;
      p.m[j] = b >> 4;
    }
  }
  for (int e = 0; e < kQK_K; ++e) p.q[e] = static_cast<uint8_t>(kq_get_quant<q>(tile, i, e));
}

void kq_parts_from_ember(QType q, const uint8_t* tile, int64_t i, KqParts& p) {
  detail::with_kquant_type(q, [&]<QType Q>() { kq_parts_from_ember_t<Q>(tile, i, p); });
}

// The tile of row r's super-block b, and r's index in it.
const uint8_t* kq_tile(const WeightMatrix& w, int64_t r, int64_t b) {
  return static_cast<const uint8_t*>(w.data) + ((r / kKqRows) * (w.cols / kQK_K) + b) * kq_tile_bytes(w.qtype);
}

int64_t kq_ggml_block_bytes(QType q) {
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS,
                     GgmlType::IQ3_S})
    if (kquant_of(t) == q) return ggml_type_info(t).block_bytes;
  return 0;
}

}  // namespace

QType kquant_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return QType::Q2_K;
    case GgmlType::Q3_K: return QType::Q3_K;
    case GgmlType::IQ4_XS: return QType::IQ4_XS;
    case GgmlType::IQ3_S: return QType::IQ3_S;
    case GgmlType::Q4_K: return QType::Q4_K;
    case GgmlType::Q5_K: return QType::Q5_K;
    case GgmlType::Q6_K: return QType::Q6_K;
    default: return QType::None;
  }
}

void repack_kquant(QType q, const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst, ThreadPool& pool) {
  const int64_t nsb = cols / kQK_K, in_block = kq_ggml_block_bytes(q), tile = kq_tile_bytes(q);
  pool.parallel_for(kquant_groups(rows), 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t i = 0; i < kKqRows && g * kKqRows + i < rows; ++i)
        for (int64_t b = 0; b < nsb; ++b) {
          const uint8_t* in = src + ((g * kKqRows + i) * nsb + b) * in_block;
          uint8_t* t = dst + (g * nsb + b) * tile;
          detail::with_kquant_type(q, [&]<QType Q>() { kq_repack_row<Q>(in, t, i); });
        }
  });
}

namespace {

// One super-block of 256 weights as Q4_K parts (quantize_q4_k_row's rule).
void kq_q4_k_parts(const float* x, KqParts& p) {
  // Each sub-block's min (-lowest value, 0 included) rounded up to the 6-bit grid of dmin, then its
  // step rounded up to the grid of d so that the highest value still maps to at most 15: no weight
  // is clipped, each is off by at most half its step.
  float lo[8], hi[8], max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    lo[j] = hi[j] = 0.0f;
    for (int k = 0; k < 32; ++k) lo[j] = std::min(lo[j], x[32 * j + k]), hi[j] = std::max(hi[j], x[32 * j + k]);
    max_min = std::max(max_min, -lo[j]);
  }
  p.dmin = f32_to_f16(max_min / 63.0f);
  const float dmin = f16_to_f32(p.dmin);
  float need[8], max_need = 0.0f;
  for (int j = 0; j < 8; ++j) {
    p.m[j] = dmin > 0.0f ? std::min(63, static_cast<int>(std::ceil(-lo[j] / dmin))) : 0;
    need[j] = (hi[j] + dmin * static_cast<float>(p.m[j])) / 15.0f;
    max_need = std::max(max_need, need[j]);
  }
  p.d = f32_to_f16(max_need / 63.0f);
  const float d = f16_to_f32(p.d);
  for (int j = 0; j < 8; ++j) {
    p.sc[j] = d > 0.0f ? std::min(63, static_cast<int>(std::ceil(need[j] / d))) : 0;
    const float dl = d * static_cast<float>(p.sc[j]), ml = dmin * static_cast<float>(p.m[j]);
    for (int k = 0; k < 32; ++k) {
      const float q = dl > 0.0f ? std::nearbyint((x[32 * j + k] + ml) / dl) : 0.0f;
      p.q[32 * j + k] = static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
    }
  }
}

}  // namespace

void quantize_q4_k_row(const float* x, int64_t cols, uint8_t* tiles, int64_t i) {
  KqParts p;
  for (int64_t b = 0; b < cols / kQK_K; ++b, x += kQK_K) {
    kq_q4_k_parts(x, p);
    kq_q4_k_parts_to_ember(p, tiles + b * kq_tile_bytes(QType::Q4_K), i);
  }
}

void quantize_q4_k_row_ggml(const float* x, int64_t cols, uint8_t* out) {
  KqParts p;
  for (int64_t b = 0; b < cols / kQK_K; ++b, x += kQK_K, out += 144) {
    kq_q4_k_parts(x, p);
    kq_store_u16(out, p.d);
    kq_store_u16(out + 2, p.dmin);
    uint8_t* s = out + 4;  // the 12 bytes kquant_scale_min unpacks
    for (int j = 0; j < 4; ++j) {
      s[j] = static_cast<uint8_t>(p.sc[j] | ((p.sc[j + 4] >> 4) << 6));
      s[j + 4] = static_cast<uint8_t>(p.m[j] | ((p.m[j + 4] >> 4) << 6));
      s[j + 8] = static_cast<uint8_t>((p.sc[j + 4] & 0x0F) | ((p.m[j + 4] & 0x0F) << 4));
    }
    for (int pair = 0; pair < 4; ++pair)  // 32 bytes per 64 weights: low nibbles the first 32
      for (int l = 0; l < 32; ++l)
        out[16 + 32 * pair + l] = static_cast<uint8_t>((p.q[64 * pair + l] & 0x0F) | ((p.q[64 * pair + 32 + l] & 0x0F) << 4));
  }
}

void dequantize_kquant_row(const WeightMatrix& w, int64_t r, float* out) {
  const QType q = w.qtype;
  KqParts p;
  for (int64_t b = 0; b < w.cols / kQK_K; ++b, out += kQK_K) {
    kq_parts_from_ember(q, kq_tile(w, r, b), r % kKqRows, p);
    const float d = f16_to_f32(p.d), dmin = f16_to_f32(p.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / p.sub;
      if (q == QType::IQ4_XS) {  // (d * scale) * table[q]
        out[e] = d * static_cast<float>(p.sc[j]) * static_cast<float>(kIq4Values[p.q[e]]);
      } else if (kq_signed_scales(q)) {  // ggml's order: (d * scale) * (q - 4 or 32)
        out[e] = d * static_cast<float>(p.sc[j]) * static_cast<float>(p.q[e] - kq_offset(q));
      } else {  // d * scale and dmin * min rounded first, then the product and difference apart
        const float dl = d * static_cast<float>(p.sc[j]), ml = dmin * static_cast<float>(p.m[j]);
        const float scaled = dl * static_cast<float>(p.q[e]);
        out[e] = scaled - ml;
      }
    }
  }
}

void quantize_acts_k(const float* x, int64_t n, int64_t cols, KQuantActs& out, ThreadPool& pool) {
  static_assert(kQK_K == 256, "a super-block is 32 vectors of eight, a sub-block of 16 two of them");
  constexpr int kVecs = kQK_K / 8;
  const int64_t nb = cols / kQK_K;
  out.n = n;
  out.cols = cols;
  out.n_blocks = nb;
  out.q.resize(static_cast<size_t>(n * cols));
  out.d.resize(static_cast<size_t>(n * nb));
  out.sum16.resize(static_cast<size_t>(n * nb * 16));
  out.sum32.resize(static_cast<size_t>(n * nb * 8));
  // Tokens in parallel; vectors give the scalar form's exact results (see quantize_acts).
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t b = 0; b < nb; ++b) {
        const float* v = x + t * cols + b * kQK_K;
        int8_t* q = out.q.data() + t * cols + b * kQK_K;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < kVecs; ++i) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * i)));
        // As ggml's Q8_K: the value of largest magnitude (the first of them) maps to -127, d = 1 /
        // that inverse scale.
        const float amax = simd::hmax8(m);
        float mx = 0.0f;
        for (int i = 0; i < kVecs && amax != 0.0f; ++i) {
          const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * i));
          if (const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ))) {
            mx = v[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
            break;
          }
        }
        const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
        const __m256 vs = _mm256_set1_ps(iscale);
        int16_t* s16 = out.sum16.data() + (t * nb + b) * 16;
        int16_t* s32 = out.sum32.data() + (t * nb + b) * 8;
        for (int i = 0; i < kVecs; i += 4) {  // 32 values: two sub-blocks of 16
          __m256i q4[4];
          for (int j = 0; j < 4; ++j) q4[j] = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(v + 8 * (i + j))));
          // Saturation to int8 is the scalar form's min(127, ...): the products lie in [-127, 127.x].
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 8 * i), simd::pack_i8(q4));
          for (int j = 0; j < 2; ++j) {  // exact: at most 16 * 127
            // The sums of the saturated quants: 128 -> 127 as stored.
            const __m256i c0 = _mm256_min_epi32(q4[2 * j], _mm256_set1_epi32(127));
            const __m256i c1 = _mm256_min_epi32(q4[2 * j + 1], _mm256_set1_epi32(127));
            s16[i / 2 + j] = static_cast<int16_t>(simd::hsum8(_mm256_add_epi32(c0, c1)));
          }
        }
        for (int j = 0; j < 8; ++j) s32[j] = static_cast<int16_t>(s16[2 * j] + s16[2 * j + 1]);
        out.d[t * nb + b] = amax != 0.0f ? 1.0f / iscale : 0.0f;
      }
  });
}

float kquant_row_dot(const WeightMatrix& w, int64_t r, const KQuantActs& a, int64_t t) {
  const QType q = w.qtype;
  KqParts p;
  float s = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    kq_parts_from_ember(q, kq_tile(w, r, b), r % kKqRows, p);
    const int8_t* xq = a.q.data() + t * a.cols + b * kQK_K;
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < kQK_K / p.sub; ++j) {
      int32_t dot = 0, xs = 0;
      for (int k = 0; k < p.sub; ++k) {
        const int v = q == QType::IQ4_XS ? kIq4Values[p.q[j * p.sub + k]] : p.q[j * p.sub + k];
        dot += v * xq[j * p.sub + k];
        xs += xq[j * p.sub + k];
      }
      isum += p.sc[j] * dot;
      msum += p.m[j] * xs;
    }
    // Q3_K / Q6_K's m is 4 / 32 * sc with d for dmin: the same bits as the kernels' sc with 4 / 32 * d,
    // as multiplying by a power of two is exact. IQ4_XS has no min.
    const float dx = a.d[t * a.n_blocks + b];
    const float dm = kq_has_dmin(q) ? f16_to_f32(p.dmin) : f16_to_f32(p.d);
    s = std::fma(static_cast<float>(isum), f16_to_f32(p.d) * dx, s);
    if (q != QType::IQ4_XS) s = std::fma(-static_cast<float>(msum), dm * dx, s);
  }
  return s;
}

}  // namespace ember::kernels
