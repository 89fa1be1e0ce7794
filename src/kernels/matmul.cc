// Dispatch of the matmul to its instruction sets, and the scalar reference (kernels in matmul_avx2.cc
// and matmul_avx512.cc).
#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/load_scalar.h"
#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/quant.h"

namespace ember::kernels {

namespace {

// Scalar quantized product of one row with one token: the exact integer dot per block, scaled.
float quant_row_dot(const WeightMatrix& w, int64_t r, const QuantizedActs& a, int64_t t) {
  float s = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    int32_t dot = 0;
    for (int64_t k = 0; k < kQBlock; ++k) dot += quant_at(w, r, b * kQBlock + k) * a.q[t * a.cols + b * kQBlock + k];
    s += static_cast<float>(dot) * (scale_at(w, r, b) * a.d[t * a.n_blocks + b]);
  }
  return s;
}

// Scalar product of one plain row with one token, summed in column order.
float float_row_dot(const WeightMatrix& w, int64_t r, const float* x) {
  float s = 0.0f;
  for (int64_t c = 0; c < w.cols; ++c) s += weight_at(w, r, c) * x[c];
  return s;
}

// Rows [r0, r1) of y for all n tokens, one sequential sum each; a holds x quantized when w is.
void reference_rows(const WeightMatrix& w, const float* x, const QuantizedActs& a, int64_t n, float* y, int64_t r0,
                    int64_t r1) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = r0; r < r1; ++r)
      y[t * w.rows + r] = w.qtype != QType::None ? quant_row_dot(w, r, a, t) : float_row_dot(w, r, x + t * w.cols);
}

// Multiply-adds worth a thread hand-off: the least work one chunk of a parallel matmul gets.
constexpr int64_t kMinChunkMacs = 32768;

}  // namespace

int64_t weight_bytes(const WeightMatrix& w) {
  if (w.qtype != QType::None) return quantized_bytes(w.qtype, w.rows, w.cols);
  if (w.layout == Layout::Panels) return packed_bytes(w.dtype, w.rows, w.cols);
  return w.rows * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
}

float weight_at(const WeightMatrix& w, int64_t r, int64_t c) {
  return simd::load1(w.data, w.dtype, w.layout == Layout::Panels ? panel_index(w.cols, r, c) : r * w.cols + c);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  matmul(w, x, n_tokens, y, pool, best_isa());
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa) {
  const MatmulOut out{&w, y};
  matmul_fused(std::span<const MatmulOut>(&out, 1), x, n_tokens, pool, isa);
}

void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  matmul_fused(outs, x, n_tokens, pool, best_isa());
}

void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa) {
  require_isa(isa, "matmul");
  if (n_tokens <= 0 || outs.empty()) return;
  const int64_t cols = outs[0].w->cols;
  // Work units are 16-row ranges (one quantized group or one panel), numbered across all outputs.
  static_assert(kPanelRows == kQGroupRows, "a work unit is both one quantized group and one panel");
  std::vector<int64_t> first(outs.size() + 1, 0);
  bool quantized = false;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].w->cols != cols) fail("matmul", "fused products need weights with the same number of columns");
    if (outs[i].w->qtype == QType::None && outs[i].w->layout != Layout::Panels)
      fail("matmul", "plain weights must be packed into panels first (kernels::pack)");
    first[i + 1] = first[i] + (outs[i].w->rows + kQGroupRows - 1) / kQGroupRows;
    quantized = quantized || outs[i].w->qtype != QType::None;
  }
  QuantizedActs a;
  if (quantized) quantize_acts(x, n_tokens, cols, a);
  auto rows = [&](const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
    if (isa == Isa::Scalar) {
      reference_rows(w, x, a, n_tokens, y, g0 * kQGroupRows, std::min(w.rows, g1 * kQGroupRows));
    } else if (w.qtype != QType::None) {
      if (isa == Isa::Avx512) detail::quant_groups_avx512(w, a, y, g0, g1);
      else detail::quant_groups_avx2(w, a, y, g0, g1);
    } else {  // one panel kernel for AVX2 and AVX-512 machines alike
      detail::panel_rows_avx2(w, x, n_tokens, y, g0, g1);
    }
  };
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(1, kQGroupRows * cols * n_tokens));
  pool.parallel_for(first.back(), grain, [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t b = std::max(u0, first[i]), e = std::min(u1, first[i + 1]);
      if (b < e) rows(*outs[i].w, outs[i].y, b - first[i], e - first[i]);
    }
  });
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  QuantizedActs a;
  if (w.qtype != QType::None) quantize_acts(x, n_tokens, w.cols, a);
  reference_rows(w, x, a, n_tokens, y, 0, w.rows);
}

void copy_row(const WeightMatrix& w, int64_t row, float* out) {
  if (w.qtype != QType::None) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = scale_at(w, row, c / kQBlock) * static_cast<float>(quant_at(w, row, c));
    return;
  }
  for (int64_t c = 0; c < w.cols; ++c) out[c] = weight_at(w, row, c);
}

}  // namespace ember::kernels
