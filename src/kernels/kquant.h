#pragma once
// llama.cpp's K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 256 weights per super-block), IQ4_XS (a
// 256-block of 4-bit indices into a non-linear table) and IQ3_S (9-bit indices into a grid of 4
// magnitudes, with sign bits) kept at their stored bits, in a layout repacked
// losslessly for int8 dot products with rows in the vector lanes (as quant.h's Q8_0 / Q4_0), and the
// Q8_K-style activations they multiply.
//
// The weight at column e of a super-block is (integer arithmetic exact, then float), j = e / W:
//   Q2_K / Q4_K / Q5_K: d * sc[j] * q - dmin * m[j], q unsigned 2 / 4 / 5 bits (W = 16 / 32 / 32);
//   Q3_K / Q6_K:        d * sc[j] * (q - 4 / 32), q unsigned 3 / 6 bits, sc signed (W = 16);
//   IQ4_XS:             d * sc[j] * kIq4Values[q], q a 4-bit index, sc signed (W = 32);
//   IQ3_S:              d * sc[j] * (q - 16), q = 16 +- a grid magnitude, sc = 1 + 2 * s (W = 32).
// Rows are padded to groups of 16 (padding weighs 0). A tile is one group's super-block, the
// tiles of a group one after the other (kq_tile_bytes each); row i's bytes in a tile:
//   d (float16) at kKqD + 2i; dmin (Q2_K, Q4_K, Q5_K) at kKqDmin + 2i; the scale of sub-block j at
//   kq_scales(q) + kq_pair_byte(j, i) (Q2_K: its scale in the low nibble, its min in the high one;
//   Q6_K, IQ3_S: signed bytes). Q3_K, Q4_K, Q5_K and IQ4_XS keep their 6-bit scales (Q4_K, Q5_K: and
//   mins) at 6 bits, as the file does: field f of row i (kq_fields(q) of them; Q4_K / Q5_K: the
//   scales, then the mins at 8 + j) has its low 4 bits in nibble f % 2 of byte kq_field_lo(f, i) and
//   its high 2 bits at bit 2 (f % 4) of byte kq_field_hi(q, f, i), both from kq_scales(q). A kernel
//   unpacks a tile's fields once (kq_unpack_fields) to bytes at kq_pair_byte(f, i), less 32 where
//   signed (Q3_K, IQ4_XS), the form the other types store.
//   A pair of sub-blocks' scales (mins) of a row are adjacent: one widening load gives each row lane
//   the pair of 16-bit factors that multiply two sums at once.
//   Nibbles (Q4_K, Q5_K, Q6_K, IQ4_XS): a 64-byte unit holds 4 consecutive quants of each of the 16
//   rows (byte 4i + k), the low 4 bits of sub-block 2p in the low nibbles and of sub-block 2p + 1 in
//   the high nibbles; unit u (< W / 4) of pair p is at kq_nibbles(q) + 64 * (p * W / 4 + u) and holds
//   columns W * 2p + 4u + k.
//   Bit fields (Q5_K's bit 4, Q6_K's bits 4 and 5, Q2_K's 2 bits, Q3_K's bits 0-1 and its bit 2 in
//   two planes) are fields of b = 1 / 2 bits, 8 / b to a byte, laid out as the nibbles: those of
//   quant (i, W * j + 4u + k) are in byte 4i + k of the 64-byte block kq_field_block(base, W, b, j, u),
//   from bit kq_field_shift(b, j, u). A block holds the units of sub-block pair j / 2 that one load
//   turns into bits with a shift and a mask.
//   IQ3_S: unit n = 8j + u (4 weights of each row: one grid index) has the indices' low bytes at
//   kKqS3Idx + 16n + i, their ninth bits as bit i of the 16-bit word at kKqS3IdxHi + 2n, and the
//   weights' signs as bit 4i + k of the 64-bit word at kKqS3Signs + 8n (1: negative).
// Per row and super-block that is the file's size (Q2_K 84 bytes, Q3_K 110, Q4_K 144, Q5_K 176, Q6_K
// 210, IQ4_XS 136), or a few bytes more (IQ3_S 114 against 110: its 4-bit scales as bytes).
#include <cstdint>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace ember::kernels {

inline bool is_kquant(QType q) {
  return q == QType::Q2_K || q == QType::Q3_K || q == QType::Q4_K || q == QType::Q5_K || q == QType::Q6_K ||
         q == QType::IQ4_XS || q == QType::IQ3_S;
}
// The K-quant of a ggml type (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_S), or QType::None.
QType kquant_of(GgmlType t);

constexpr int64_t kKqRows = 16;  // rows per group
// Bytes per row and super-block, and per tile (a group's super-block).
constexpr int64_t kq_block_bytes(QType q) {
  switch (q) {
    case QType::Q2_K: return 84;
    case QType::Q3_K: return 110;
    case QType::IQ3_S: return 114;
    case QType::Q4_K: return 144;
    case QType::Q5_K: return 176;
    case QType::IQ4_XS: return 136;
    default: return 210;  // Q6_K
  }
}
constexpr int64_t kq_tile_bytes(QType q) { return kKqRows * kq_block_bytes(q); }
// Sub-block width.
constexpr int kq_sub_width(QType q) { return q == QType::Q2_K || q == QType::Q3_K || q == QType::Q6_K ? 16 : 32; }
// Signed scales (and the offset their quants carry: weight = d * sc * (q - offset)), and a dmin.
// (IQ3_S's are positive, 1..31: read as signed bytes they are the same.)
constexpr bool kq_signed_scales(QType q) {
  return q == QType::Q3_K || q == QType::Q6_K || q == QType::IQ4_XS || q == QType::IQ3_S;
}
constexpr int kq_offset(QType q) { return q == QType::Q3_K ? 4 : q == QType::Q6_K ? 32 : q == QType::IQ3_S ? 16 : 0; }
constexpr bool kq_has_dmin(QType q) { return q == QType::Q2_K || q == QType::Q4_K || q == QType::Q5_K; }
constexpr bool kq_has_nibbles(QType q) { return q != QType::Q2_K && q != QType::Q3_K && q != QType::IQ3_S; }
// Whether the quants have bit planes of kq_high_bits (Q5_K, Q6_K above the nibbles; Q2_K, Q3_K).
constexpr bool kq_has_high_plane(QType q) {
  return q == QType::Q2_K || q == QType::Q3_K || q == QType::Q5_K || q == QType::Q6_K;
}
// Whether a tile's quants lie in one plane (Q4_K, IQ4_XS: nibbles; Q2_K: its 2-bit plane), which
// a kernel reads as one stream; Q5_K and Q6_K (nibbles and high bits), Q3_K (two planes) and IQ3_S
// (indices, their ninth bits and signs) read several regions of each tile at once.
constexpr bool kq_one_plane(QType q) {
  return q == QType::Q4_K || q == QType::IQ4_XS || q == QType::Q2_K;
}
// Field offsets within a tile.
constexpr int64_t kKqD = 0, kKqDmin = 32, kKqSc = 64, kKqNibbles = 256, kKq5Bits = 2304;  // Q4_K, Q5_K
constexpr int64_t kKq6Sc = 32, kKq6Nibbles = 288, kKq6Bits = 2336;
constexpr int64_t kKq2Sc = 64, kKq2Bits = 320;                     // Q2_K
constexpr int64_t kKq3Sc = 32, kKq3Bits = 224, kKq3High = 1248;   // Q3_K: bits 0-1, bit 2
constexpr int64_t kKqXsSc = 32, kKqXsNibbles = 128;               // IQ4_XS
constexpr int64_t kKqS3Sc = 32, kKqS3Idx = 160, kKqS3IdxHi = 1184, kKqS3Signs = 1312;  // IQ3_S
constexpr int64_t kq_scales(QType q) {
  switch (q) {
    case QType::Q2_K: return kKq2Sc;
    case QType::Q3_K: return kKq3Sc;
    case QType::Q6_K: return kKq6Sc;
    case QType::IQ4_XS: return kKqXsSc;
    case QType::IQ3_S: return kKqS3Sc;
    default: return kKqSc;
  }
}
// 6-bit fields kept packed (see above): how many per row, where a field's bits lie from
// kq_scales(q), and the bytes they unpack to (kq_pair_byte order; Q4_K / Q5_K's mins from byte 128).
constexpr bool kq_packed_fields(QType q) {
  return q == QType::Q3_K || q == QType::Q4_K || q == QType::Q5_K || q == QType::IQ4_XS;
}
constexpr int kq_fields(QType q) { return q == QType::IQ4_XS ? 8 : 16; }
constexpr int64_t kq_field_lo(int f, int64_t i) { return 16 * (f / 2) + i; }
constexpr int64_t kq_field_hi(QType q, int f, int64_t i) { return 8 * kq_fields(q) + 16 * (f / 4) + i; }
constexpr int64_t kq_unpacked_fields_bytes(QType q) { return 16 * kq_fields(q); }
constexpr int64_t kKqUnpackedMins = 128;  // Q4_K / Q5_K: where the mins begin among the unpacked fields
constexpr int64_t kq_nibbles(QType q) { return q == QType::Q6_K ? kKq6Nibbles : q == QType::IQ4_XS ? kKqXsNibbles : kKqNibbles; }
// Where unit u of sub-block pair p (64 bytes: 4 quants of each row) lies among a tile's nibbles.
constexpr int64_t kq_unit_offset(QType q, int p, int u) { return 64 * (p * (kq_sub_width(q) / 4) + u); }
// Where sub-block j's scale (min) of row i lies among a tile's scales (mins).
constexpr int64_t kq_pair_byte(int j, int64_t i) { return 32 * (j / 2) + 2 * i + j % 2; }
// A plane of b-bit fields from `base` (sub-blocks of W): the block of sub-block j, unit u, and the
// bit its fields start at. A block has both sub-blocks of a pair for 8 / b / 2 consecutive units.
constexpr int64_t kq_field_block(int64_t base, int w, int b, int j, int u) {
  return base + 64 * ((j / 2) * (w / 4 / (4 / b)) + u / (4 / b));
}
constexpr int kq_field_shift(int b, int j, int u) { return b * (2 * (u % (4 / b)) + j % 2); }
// The bits above the nibbles (Q5_K: bit 4; Q6_K: bits 4 and 5) or, without nibbles, the low 2 bits
// (Q2_K, Q3_K): their plane's block and first bit for sub-block j, unit u.
constexpr int kq_high_bits(QType q) { return q == QType::Q5_K ? 1 : 2; }
constexpr int64_t kq_high_base(QType q) {
  return q == QType::Q5_K ? kKq5Bits : q == QType::Q6_K ? kKq6Bits : q == QType::Q3_K ? kKq3Bits : kKq2Bits;
}
constexpr int64_t kq_high_block(QType q, int j, int u) {
  return kq_field_block(kq_high_base(q), kq_sub_width(q), kq_high_bits(q), j, u);
}
constexpr int kq_high_shift(QType q, int j, int u) { return kq_field_shift(kq_high_bits(q), j, u); }
// Q3_K's bit 2: a 1-bit plane.
constexpr int64_t kq3_bit2_block(int j, int u) { return kq_field_block(kKq3High, 16, 1, j, u); }
constexpr int kq3_bit2_shift(int j, int u) { return kq_field_shift(1, j, u); }
static_assert(kKq6Bits + 16 * 64 == kq_tile_bytes(QType::Q6_K) && kKq5Bits + 16 * 32 == kq_tile_bytes(QType::Q5_K));
static_assert(kKq2Bits + 16 * 64 == kq_tile_bytes(QType::Q2_K) && kKq3High + 16 * 32 == kq_tile_bytes(QType::Q3_K));
static_assert(kKqXsNibbles + 16 * 128 == kq_tile_bytes(QType::IQ4_XS) && kKq3Bits + 16 * 64 == kKq3High);
static_assert(kKqSc + 12 * kq_fields(QType::Q4_K) == kKqNibbles && kKq3Sc + 12 * kq_fields(QType::Q3_K) == kKq3Bits &&
              kKqXsSc + 12 * kq_fields(QType::IQ4_XS) == kKqXsNibbles && kKqNibbles + 16 * 128 == kKq5Bits &&
              kKqNibbles + 16 * 128 == kq_tile_bytes(QType::Q4_K));
static_assert(kKqS3Idx + 64 * 16 == kKqS3IdxHi && kKqS3IdxHi + 64 * 2 == kKqS3Signs &&
              kKqS3Signs + 64 * 8 == kq_tile_bytes(QType::IQ3_S));

inline int64_t kquant_groups(int64_t rows) { return (rows + kKqRows - 1) / kKqRows; }
// Bytes a K-quant matrix occupies.
inline int64_t kquant_bytes(QType q, int64_t rows, int64_t cols) {
  return kquant_groups(rows) * (cols / kQK_K) * kq_tile_bytes(q);
}

// Repacks `rows` rows of ggml super-blocks (`src`, ggml's layout) into Ember's (`dst`, kquant_bytes,
// zeroed). Lossless.
void repack_kquant(QType q, const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst, ThreadPool& pool);
// Quantizes one float row (cols a multiple of 256) to Q4_K into row i of its group's tiles (the first
// at `tiles`, zeroed): per sub-block of 32 a min and step from its range, rounded up to the 6-bit
// grids of the super-block's float16 dmin and d (so nothing clips), quants rounded to nearest.
void quantize_q4_k_row(const float* x, int64_t cols, uint8_t* tiles, int64_t i);
// The same quants in ggml's Q4_K blocks (144 bytes per 256 weights, gguf_quants.cc's layout), as a
// GGUF file stores them.
void quantize_q4_k_row_ggml(const float* x, int64_t cols, uint8_t* out);
// Dequantizes row r of a K-quant matrix to the bits ggml's reference gives.
void dequantize_kquant_row(const WeightMatrix& w, int64_t r, float* out);

// Activations quantized per 256 values to int8 (Q8_K: float scale, quants in [-127, 127]) with the
// sums of each 16 and each 32 quants (exact in 16 bits, as ggml's bsums), which the mins (Q4_K,
// Q5_K) and Q6_K's offset of 32 multiply.
struct KQuantActs {
  int64_t n = 0, cols = 0, n_blocks = 0;
  std::vector<int8_t> q;       // [n][cols]
  std::vector<float> d;        // [n][n_blocks]
  std::vector<int16_t> sum16;  // [n][n_blocks][16]
  std::vector<int16_t> sum32;  // [n][n_blocks][8]
};
void quantize_acts_k(const float* x, int64_t n, int64_t cols, KQuantActs& out, ThreadPool& pool);

// Scalar reference of row r with token t: per super-block the exact integer dots
// isum = sum sc * (q . x) and msum = sum m * (sum of x) (Q3_K / Q6_K: sc, its offset 4 / 32 going to
// dmin), then s = fma(isum, d * dx, s) and s = fma(-msum, dmin * dx, s) (Q3_K / Q6_K: 4 / 32 * d for
// dmin; IQ4_XS: isum = sum sc * (table[q] . x) and the first only) in super-block order, as every
// kernel does: the products' bits do not depend on the instruction set.
float kquant_row_dot(const WeightMatrix& w, int64_t r, const KQuantActs& a, int64_t t);

}  // namespace ember::kernels
