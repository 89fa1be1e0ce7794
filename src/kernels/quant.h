#pragma once
// Block-quantized weights of 32 weights per block and float16 scale (llama.cpp's Q8_0 / Q4_0, which
// Ember also quantizes to, and Q4_1, Q5_0, Q5_1, IQ4_NL, kept as a GGUF file stores them; MXFP4, whose
// scale is an E8M0 exponent byte, from GGUF or gpt-oss's safetensors) in a layout
// made for int8 dot products, and int8 quantized activations.
//
// Layout: rows are padded to groups of 16. For group g and block b (columns 32b..32b+31), the
// quants of the 16 rows are interleaved in 4-byte units so that one 64-byte vector holds 4
// consecutive weights of each of the 16 rows (qblock_bytes per group and block):
//   Q8_0: 512 bytes; byte (j*16 + i)*4 + m = q[16g+i][32b+4j+m] (signed, -127..127), j < 8.
//   Q4_0, Q4_1, IQ4_NL, MXFP4: 256 bytes; byte (j*16 + i)*4 + m holds the nibble of q[16g+i][32b+4j+m] in its
//         low 4 bits and that of q[16g+i][32b+16+4j+m] in its high 4 bits, j < 4 (ggml's nibbles).
//   Q5_0, Q5_1: those 256 bytes, then 64 bytes of fifth bits: bit j of byte i*4 + m is the fifth bit
//         of q[16g+i][32b+4j+m], j < 8 (unit j's).
// Scales: float16 at (g * n_blocks + b) * qscale_stride + i; Q4_1 / Q5_1's mins 16 further on. MXFP4
// keeps its E8M0 bytes as stored: byte i of the uint16 slots at (g * n_blocks + b) * qscale_stride
// (one byte a row, as in the file), the scale being e8m0_half_to_f32 of it.
// The weight is scale * v (+ min), v: q (Q8_0), nibble - 8 (Q4_0), nibble (Q4_1), q5 - 16 (Q5_0), q5
// (Q5_1), kIq4Values[nibble] (IQ4_NL), kMxfp4Values[nibble] (MXFP4): ggml's definitions, so a repacked
// file loses nothing.
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
// "none", "q8_0", "q4_0" or "q4_k" (one type for every matrix); throws ember::Error naming them otherwise.
QType parse_qtype(const std::string& s);
// What --quantize accepts (parse_quantization, kernels/quant_mix.h): those, then llama.cpp's mixes
// "q4_k_m" and "q5_k_m".
std::span<const char* const> quantize_names();

// Whether a matrix with this many columns can be quantized (whole blocks only; K-quants: whole
// super-blocks of 256).
inline bool quantizable(int64_t cols) { return cols > 0 && cols % kQBlock == 0; }
inline bool quantizable(int64_t cols, QType q) {
  return quantizable(cols) && (!is_kquant(q) || cols % kQK_K == 0);
}
// The 32-weight block types of this layout.
constexpr bool is_block32(QType q) {
  return q == QType::Q8_0 || q == QType::Q4_0 || q == QType::Q4_1 || q == QType::Q5_0 || q == QType::Q5_1 ||
         q == QType::IQ4_NL || q == QType::MXFP4;
}
// Nibbles that index a table of signed values (IQ4_NL's, MXFP4's) rather than being the value.
constexpr bool qhas_table(QType q) { return q == QType::IQ4_NL || q == QType::MXFP4; }
// The scale is an E8M0 exponent byte (MXFP4), not a float16.
constexpr bool qhas_e8m0_scale(QType q) { return q == QType::MXFP4; }
// Blocks with a min (weight = scale * v + min), and with fifth bits.
constexpr bool qhas_min(QType q) { return q == QType::Q4_1 || q == QType::Q5_1; }
constexpr bool qhas_fifth_bits(QType q) { return q == QType::Q5_0 || q == QType::Q5_1; }
constexpr int64_t kQNibbleBytes = kQ4Half * kQGroupRows;  // where Q5_0 / Q5_1's fifth bits start
// Bytes of quants per (16-row group, block).
constexpr int64_t qblock_bytes(QType q) {
  return q == QType::Q8_0 ? kQBlock * kQGroupRows : kQNibbleBytes + (qhas_fifth_bits(q) ? kQUnitRowBytes : 0);
}
// uint16 slots per (group, block): the 16 rows' float16 scales, then (Q4_1, Q5_1) their mins; MXFP4's
// 16 E8M0 bytes fill half as many.
constexpr int64_t qscale_stride(QType q) {
  return qhas_e8m0_scale(q) ? kQGroupRows / 2 : qhas_min(q) ? 2 * kQGroupRows : kQGroupRows;
}
// The signed value of nibble v of a table type.
constexpr int qtable_value(QType q, int v) { return q == QType::MXFP4 ? kMxfp4Values[v] : kIq4Values[v]; }
// Bytes a quantized matrix occupies (quants and scales).
int64_t quantized_bytes(QType q, int64_t rows, int64_t cols);

// A quantized copy of a weight matrix; owns its memory.
class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  const WeightMatrix& view() const { return view_; }
  int64_t bytes() const { return n_quant_bytes_ + n_scales_ * 2; }

 private:
  friend QuantizedMatrix quantize(const WeightMatrix& w, QType q, ThreadPool& pool, WeightArena* arena);
  friend QuantizedMatrix from_ggml_blocks(GgmlType type, const void* data, int64_t rows, int64_t cols, ThreadPool& pool,
                                          WeightArena* arena);
  // Quants, then (from a 64-byte boundary) scales, in one buffer: decode streams both.
  static QuantizedMatrix allocate(QType q, int64_t rows, int64_t cols, WeightArena* arena);
  uint16_t* scales() const { return reinterpret_cast<uint16_t*>(memory_.data() + scales_at_); }
  WeightBuffer memory_;
  int64_t n_quant_bytes_ = 0, n_scales_ = 0, scales_at_ = 0;
  WeightMatrix view_;
};

// Quantizes a float matrix (F32/F16/BF16) with round-to-nearest per block: Q8_0 scale = amax/127,
// Q4_0 scale = -(value of largest magnitude)/8 as llama.cpp does; Q4_K as quantize_q4_k_row
// (kquant.h). Requires quantizable(w.cols, q). Memory from `arena` when given (a model's weights), else
// its own.
QuantizedMatrix quantize(const WeightMatrix& w, QType q, ThreadPool& pool, WeightArena* arena = nullptr);

// The QType that keeps ggml blocks of `type` as stored (QType::None: no kernel for them), and whether
// there is one (what a GGUF loader asks before from_ggml_blocks).
QType stored_qtype(GgmlType type);
inline bool has_stored_kernel(GgmlType type) { return stored_qtype(type) != QType::None; }

// ggml Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 rows (`rows` rows of `cols` weights, ggml's blocks)
// repacked into this layout, and Q4_K / Q5_K / Q6_K rows into kquant.h's. Lossless: the same quants
// and scales (and mins), so every weight dequantizes to the bits dequantize_row gives. Throws
// ember::Error naming the type for a type without a kernel or cols not a multiple of the block size.
// Memory from `arena` when given, else its own.
QuantizedMatrix from_ggml_blocks(GgmlType type, const void* data, int64_t rows, int64_t cols, ThreadPool& pool,
                                 WeightArena* arena = nullptr);

// A float matrix (F32/F16/BF16) quantized by ggml's reference quantizer (quantize_row_ref, any type
// can_quantize_ref takes) to ggml's blocks and repacked by from_ggml_blocks: the bits llama-quantize
// would write, held as a loaded file's are. Throws ember::Error as those do.
QuantizedMatrix quantize_ggml(const WeightMatrix& w, GgmlType type, ThreadPool& pool, WeightArena* arena = nullptr);

// The quantized value v (before scaling) of weight [r][c], and the scale and min (0 where the type
// has none) of its block.
int quant_at(const WeightMatrix& w, int64_t r, int64_t c);
float scale_at(const WeightMatrix& w, int64_t r, int64_t block);
float min_at(const WeightMatrix& w, int64_t r, int64_t block);

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
