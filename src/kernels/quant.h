#pragma once
// 8-bit and 4-bit block-quantized weights (llama.cpp's Q8_0 / Q4_0 numerics: 32 weights share one
// float16 scale) in a layout made for int8 dot products, and int8 quantized activations.
//
// Layout: rows are padded to groups of 16. For group g and block b (columns 32b..32b+31), the
// quants of the 16 rows are interleaved in 4-byte units so that one 64-byte vector holds 4
// consecutive weights of each of the 16 rows:
//   Q8_0: 512 bytes; byte (j*16 + i)*4 + m = q[16g+i][32b+4j+m] (signed, -127..127), j < 8.
//   Q4_0: 256 bytes; byte (j*16 + i)*4 + m holds q[16g+i][32b+4j+m] + 8 in its low nibble and
//         q[16g+i][32b+16+4j+m] + 8 in its high nibble, j < 4.
// Scales: float16 at (g * n_blocks + b) * 16 + i. The weight is scale * q.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/gguf_quants.h"
#include "kernels/kquant.h"
#include "kernels/matmul.h"
#include "kernels/weight_buffer.h"

namespace ember::kernels {

constexpr int64_t kQBlock = 32;     // weights per scale
constexpr int64_t kQGroupRows = 16;  // rows interleaved together
constexpr int64_t kQUnit = 4;        // consecutive weights of one row in a unit (one int8 dot-product lane)
constexpr int64_t kQUnitRowBytes = kQUnit * kQGroupRows;  // one unit of all 16 rows: a 64-byte vector
constexpr int64_t kQ4Half = kQBlock / 2;  // q4_0: columns [0, 16) in the low nibbles, [16, 32) in the high

const char* qtype_name(QType q);
QType parse_qtype(const std::string& s);  // a name of quantize_names(); throws ember::Error otherwise
// What Ember quantizes to at load ("none", "q8_0", "q4_0", "q4_k"): what --quantize accepts.
std::span<const char* const> quantize_names();

// Whether a matrix with this many columns can be quantized (whole blocks only; K-quants: whole
// super-blocks of 256).
inline bool quantizable(int64_t cols) { return cols > 0 && cols % kQBlock == 0; }
inline bool quantizable(int64_t cols, QType q) {
  return quantizable(cols) && (!is_kquant(q) || cols % kQK_K == 0);
}
// Bytes of quants per (16-row group, block).
constexpr int64_t qblock_bytes(QType q) { return q == QType::Q8_0 ? kQBlock * kQGroupRows : kQ4Half * kQGroupRows; }
// Bytes a quantized matrix occupies (quants and scales).
int64_t quantized_bytes(QType q, int64_t rows, int64_t cols);

// A quantized copy of a weight matrix; owns its memory.
class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  const WeightMatrix& view() const { return view_; }
  int64_t bytes() const { return n_quant_bytes_ + n_scales_ * 2; }

 private:
  friend QuantizedMatrix quantize(const WeightMatrix& w, QType q, ThreadPool& pool);
  friend QuantizedMatrix from_ggml_blocks(GgmlType type, const void* data, int64_t rows, int64_t cols, ThreadPool& pool);
  static QuantizedMatrix allocate(QType q, int64_t rows, int64_t cols);
  WeightBuffer quants_;
  std::unique_ptr<uint16_t[]> scales_;
  int64_t n_quant_bytes_ = 0, n_scales_ = 0;
  WeightMatrix view_;
};

// Quantizes a float matrix (F32/F16/BF16) with round-to-nearest per block: Q8_0 scale = amax/127,
// Q4_0 scale = -(value of largest magnitude)/8 as llama.cpp does; Q4_K as quantize_q4_k_row
// (kquant.h). Requires quantizable(w.cols, q).
QuantizedMatrix quantize(const WeightMatrix& w, QType q, ThreadPool& pool);

// ggml Q8_0 / Q4_0 rows (`rows` rows of `cols` weights, ggml's 34- / 18-byte blocks) repacked into
// this layout, and Q4_K / Q5_K / Q6_K rows into kquant.h's. Lossless: the same quants and float16
// scales, so every weight dequantizes to the bits dequantize_row gives. Throws ember::Error for
// another type or cols not a multiple of the block size.
QuantizedMatrix from_ggml_blocks(GgmlType type, const void* data, int64_t rows, int64_t cols, ThreadPool& pool);

// The quantized value (before scaling) of weight [r][c] and the scale of its block.
int quant_at(const WeightMatrix& w, int64_t r, int64_t c);
float scale_at(const WeightMatrix& w, int64_t r, int64_t block);

// Activations quantized per 32-value block to int8 with a float scale (amax/127), as the int8 dot
// products need; s holds the sum of each block's quants (for the unsigned-offset correction).
struct QuantizedActs {
  int64_t n = 0, cols = 0, n_blocks = 0;
  std::vector<int8_t> q;    // [n][cols]
  std::vector<float> d;     // [n][n_blocks]
  std::vector<int32_t> s;   // [n][n_blocks]
};
void quantize_acts(const float* x, int64_t n, int64_t cols, QuantizedActs& out, ThreadPool& pool);

}  // namespace ember::kernels
