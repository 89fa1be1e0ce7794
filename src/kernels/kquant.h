#pragma once
// llama.cpp's K-quants (Q4_K, Q5_K, Q6_K: 256 weights per super-block) kept at their stored bits, in
// a layout repacked losslessly for int8 dot products with rows in the vector lanes (as quant.h's
// Q8_0 / Q4_0), and the Q8_K-style activations they multiply.
//
// The weight at column e of a super-block is (integer arithmetic exact, then float):
//   Q4_K / Q5_K: d * sc[e / 32] * q - dmin * m[e / 32], q unsigned 4 / 5 bits (sub-blocks of W = 32);
//   Q6_K:        d * sc[e / 16] * (q - 32), q unsigned 6 bits, sc signed (sub-blocks of W = 16).
// Rows are padded to groups of 16 (padding weighs 0). A tile is one group's super-block, the
// tiles of a group one after the other (kq_tile_bytes each); row i's bytes in a tile:
//   d (float16) at kKqD + 2i; Q4_K / Q5_K: dmin at kKqDmin + 2i, sc of sub-block j at kKqSc +
//   kq_pair_byte(j, i), m at kKqMin + kq_pair_byte(j, i); Q6_K: sc (int8) at kKq6Sc + kq_pair_byte(j, i).
//   A pair of sub-blocks' scales (mins) of a row are adjacent: one widening load gives each row lane
//   the pair of 16-bit factors that multiply two sums at once.
//   Quants: a 64-byte unit holds 4 consecutive quants of each of the 16 rows (byte 4i + k), the low 4
//   bits of sub-block 2p in the low nibbles and of sub-block 2p + 1 in the high nibbles; unit u
//   (< W / 4) of pair p is at nibbles + 64 * (p * W / 4 + u) and holds columns W * 2p + 4u + k.
//   High bits (Q5_K: bit 4, Q6_K: bits 4 and 5) are fields of b = 1 / 2 bits, 8 / b to a byte, laid
//   out as the nibbles: those of quant (i, W * j + 4u + k) are in byte 4i + k of the 64-byte block
//   kq_high_block(q, j, u), from bit kq_high_shift(q, j, u). A block holds the units of sub-block pair
//   j / 2 that one load turns into high bits with a shift and a mask.
// Per row and super-block that is the file's size (Q6_K: 210 bytes) or 4 bytes more (Q4_K 148 against
// 144, Q5_K 180 against 176: the scales and mins unpacked to bytes).
#include <cstdint>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace ember::kernels {

inline bool is_kquant(QType q) { return q == QType::Q4_K || q == QType::Q5_K || q == QType::Q6_K; }
// The K-quant of a ggml type (Q4_K, Q5_K, Q6_K), or QType::None.
QType kquant_of(GgmlType t);

constexpr int64_t kKqRows = 16;  // rows per group
// Bytes per row and super-block, and per tile (a group's super-block).
constexpr int64_t kq_block_bytes(QType q) { return q == QType::Q4_K ? 148 : q == QType::Q5_K ? 180 : 210; }
constexpr int64_t kq_tile_bytes(QType q) { return kKqRows * kq_block_bytes(q); }
// Field offsets within a tile.
constexpr int64_t kKqD = 0, kKqDmin = 32, kKqSc = 64, kKqMin = 192, kKqNibbles = 320, kKq5Bits = 2368;
constexpr int64_t kKq6Sc = 32, kKq6Nibbles = 288, kKq6Bits = 2336;
// Sub-block width and count.
constexpr int kq_sub_width(QType q) { return q == QType::Q6_K ? 16 : 32; }
// Where unit u of sub-block pair p (64 bytes: 4 quants of each row) lies among a tile's nibbles.
constexpr int64_t kq_unit_offset(QType q, int p, int u) { return 64 * (p * (kq_sub_width(q) / 4) + u); }
// Where sub-block j's scale (min) of row i lies among a tile's scales (mins).
constexpr int64_t kq_pair_byte(int j, int64_t i) { return 32 * (j / 2) + 2 * i + j % 2; }
// The high bits of sub-block j, unit u (Q5_K, Q6_K): their block's offset in a tile, and the bit
// their fields start at. A block has both sub-blocks of a pair for 8 / b / 2 consecutive units.
constexpr int kq_high_bits(QType q) { return q == QType::Q6_K ? 2 : 1; }
constexpr int kq_high_units(QType q) { return 4 / kq_high_bits(q); }
constexpr int64_t kq_high_block(QType q, int j, int u) {
  return (q == QType::Q6_K ? kKq6Bits : kKq5Bits) + 64 * ((j / 2) * (kq_sub_width(q) / 4 / kq_high_units(q)) + u / kq_high_units(q));
}
constexpr int kq_high_shift(QType q, int j, int u) { return kq_high_bits(q) * (2 * (u % kq_high_units(q)) + j % 2); }

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
// isum = sum sc * (q . x) and msum = sum m * (sum of x) (Q6_K: sc, its offset 32 going to dmin), then
// s = fma(isum, d * dx, s) and s = fma(-msum, dmin * dx, s) (Q6_K: 32 * d for dmin) in super-block
// order, as every kernel does: the products' bits do not depend on the instruction set.
float kquant_row_dot(const WeightMatrix& w, int64_t r, const KQuantActs& a, int64_t t);

}  // namespace ember::kernels
