#pragma once
// llama.cpp's K-quants (Q4_K, Q5_K, Q6_K: 256 weights per super-block) kept at their stored bits, in
// a row-major layout repacked losslessly for SIMD unpacking, and the Q8_K-style activations their
// integer dot products take.
//
// Each row is its super-blocks one after the other (kq_block_bytes each); the weight at column e of a
// super-block is (integer arithmetic exact, then float):
//   Q4_K / Q5_K: d * sc[e / 32] * q - dmin * m[e / 32], q unsigned 4 / 5 bits;
//   Q6_K:        d * sc[e / 16] * (q - 32), q unsigned 6 bits, sc signed.
// Layout of one super-block (d, dmin float16 bits):
//   Q4_K: d, dmin, sc[8], m[8], qs[128]                    (148 bytes, ggml: 144)
//   Q5_K: d, dmin, sc[8], m[8], qs[128], qh[32]            (180 bytes, ggml: 176)
//   Q6_K: d, sc[16] (int8), ql[128], qh[64]                (210 bytes, as ggml)
// qs / ql byte 64h + i (h < 2, i < 64) holds the low 4 bits of q[128h + i] in its low nibble and of
// q[128h + 64 + i] in its high nibble, so a 64-byte load yields 64 consecutive weights twice and a
// 32-byte load 32 twice. Q5_K: bit e % 8 of qh[e / 8] is bit 4 of q[e]. Q6_K: bits 2s, 2s+1 of
// qh[i] (i < 64) are bits 4-5 of q[64s + i].
#include <cstdint>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"

namespace ember::kernels {

inline bool is_kquant(QType q) { return q == QType::Q4_K || q == QType::Q5_K || q == QType::Q6_K; }
// The K-quant of a ggml type (Q4_K, Q5_K, Q6_K), or QType::None.
QType kquant_of(GgmlType t);

// Bytes of one super-block in Ember's layout (see above).
constexpr int64_t kq_block_bytes(QType q) { return q == QType::Q4_K ? 148 : q == QType::Q5_K ? 180 : 210; }
// Field offsets within a super-block.
constexpr int64_t kKqScales = 4;                               // Q4_K / Q5_K: sc[8], then m[8]
constexpr int64_t kKqQs = 20;                                  // Q4_K / Q5_K nibbles
constexpr int64_t kKq5Qh = kKqQs + 128;                        // Q5_K fifth bits
constexpr int64_t kKq6Scales = 2, kKq6Ql = 18, kKq6Qh = 146;  // Q6_K
// Bytes of one row and of a whole K-quant matrix.
inline int64_t kquant_row_bytes(QType q, int64_t cols) { return cols / kQK_K * kq_block_bytes(q); }
inline int64_t kquant_bytes(QType q, int64_t rows, int64_t cols) { return rows * kquant_row_bytes(q, cols); }

// Repacks one ggml super-block (`src`, ggml's layout) into Ember's (`dst`). Lossless.
void repack_kquant_block(QType q, const uint8_t* src, uint8_t* dst);
// Dequantizes `cols` weights of one row in Ember's layout, to the bits ggml's reference gives.
void dequantize_kquant_row(QType q, const uint8_t* row, int64_t cols, float* out);

// Activations quantized per 256 values to int8 (Q8_K: float scale, quants in [-127, 127]) with the
// sums of each 16 quants, which the mins (Q4_K, Q5_K) and Q6_K's offset of 32 multiply.
struct KQuantActs {
  int64_t n = 0, cols = 0, n_blocks = 0;
  std::vector<int8_t> q;      // [n][cols]
  std::vector<float> d;       // [n][n_blocks]
  std::vector<int16_t> bsum;  // [n][n_blocks][16]
};
void quantize_acts_k(const float* x, int64_t n, int64_t cols, KQuantActs& out);

// Scalar reference of one row (Ember's layout) with token t: per super-block the exact integer dots
// isum = sum sc * (q . x) and msum = sum m * bsum (Q6_K: sum sc * bsum, times 32), then
// d * dx * isum - dmin * dx * msum summed in super-block order.
float kquant_row_dot(QType q, const uint8_t* row, const KQuantActs& a, int64_t t);

}  // namespace ember::kernels
