#pragma once
// Matrix products of activations (float32) with weights in their stored dtype or quantized blocks.
#include <cstdint>
#include <span>

#include "base/dtype.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

namespace ember::kernels {

// Block quantization of a weight matrix (the 32-weight blocks Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// MXFP4: quant.h; the 256-weight K-quants and IQ4_XS: kquant.h); None: plain dtype storage.
enum class QType : uint8_t { None, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, IQ4_XS, IQ3_S, MXFP4 };
inline constexpr int kQTypes = 15;  // values of QType

// How plain weights are stored: Rows, row-major as in a checkpoint; Panels, packed for the matmul
// (pack.h).
enum class Layout : uint8_t { Rows, Panels };

// A weight matrix [rows][cols]; rows are output features. Plain: `dtype` values in `layout`.
// Quantized (qtype != None): data points to the blocks and scales to their float16 scales (MXFP4: E8M0
// bytes; layout in quant.h; K-quants keep their scales in their super-blocks, kquant.h); dtype and layout are unused.
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  QType qtype = QType::None;
  const uint16_t* scales = nullptr;
  Layout layout = Layout::Rows;
  // Plain BF16 weights only: the activations are rounded to BF16 (nearest even) before the product,
  // as llama.cpp computes BF16 weights, so that CPUs with AVX512-BF16 multiply them with the BF16 dot
  // product at twice the float32 rate; every instruction set gives the same bits (float32 sums of the
  // exact products in column order). Off: float32 activations.
  bool bf16_activations = false;
};

// Bytes of weight data one product reads (what bounds decode speed).
int64_t weight_bytes(const WeightMatrix& w);

// y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens (x: [n_tokens][cols], y: [n_tokens][rows]).
// Rows are split across the pool's threads; tokens are processed in cache-sized blocks so each
// weight tile is reused across many tokens. Plain weights must be packed into panels (pack.h); each
// output is then one fused multiply-add chain in column order, so a token's result has the same bits
// however many tokens share the call. Quantized weights multiply int8-quantized activations.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
// The same with an explicit instruction set (tests run every supported one).
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa);

// One product of a fused set: y = x times w transposed.
struct MatmulOut {
  const WeightMatrix* w;
  float* y;
};
// Several products of the same activations (q/k/v projections, gate/up) in one pool dispatch and
// one activation quantization: decode pays one thread hand-off instead of several. All weights
// have the same number of columns.
void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool);
void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa);

// Whether products of weights with bf16_activations run on the BF16 dot product at isa (AVX512-BF16
// CPUs, from three tokens on); elsewhere the float32 kernels compute the same bits.
bool bf16_dot_product_used(Isa isa = best_isa());

// Scalar reference of matmul (one thread, sequential sums; quantized weights use the same activation
// quantization): the oracle for every SIMD path. Plain weights may be in either layout.
void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);

// Weight (r, c) of a plain matrix in either layout, as float32.
float weight_at(const WeightMatrix& w, int64_t r, int64_t c);

// out[i] = row `row` of w converted (or dequantized) to float32 (embedding lookup); any layout.
void copy_row(const WeightMatrix& w, int64_t row, float* out);

}  // namespace ember::kernels
