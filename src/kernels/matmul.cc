// Dispatch of the matmul to its instruction sets, and the scalar reference (the kernels are the
// matmul_*_avx2.cc and matmul_*_avx512.cc files, one per weight family and instruction set).
#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/kquant.h"
#include "kernels/load_scalar.h"
#include "kernels/matmul_impl.h"
#include "kernels/pack.h"
#include "kernels/quant.h"

namespace ember::kernels {

namespace {

// Scalar quantized product of one row with one token: the exact integer dot per block, scaled by
// one fused multiply-add (and the min times the activations' sum by another) in block order, as
// every kernel does: the bits do not depend on the instruction set.
float quant_row_dot(const WeightMatrix& w, int64_t r, const QuantizedActs& a, int64_t t) {
  float s = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    int32_t dot = 0;
    for (int64_t k = 0; k < kQBlock; ++k) dot += quant_at(w, r, b * kQBlock + k) * a.q[t * a.cols + b * kQBlock + k];
    const float dx = a.d[t * a.n_blocks + b];
    s = std::fma(static_cast<float>(dot), scale_at(w, r, b) * dx, s);
    if (qhas_min(w.qtype)) s = std::fma(static_cast<float>(a.s[t * a.n_blocks + b]), min_at(w, r, b) * dx, s);
  }
  return s;
}

// Scalar product of one plain row with one token, summed in column order.
float float_row_dot(const WeightMatrix& w, int64_t r, const float* x) {
  float s = 0.0f;
  for (int64_t c = 0; c < w.cols; ++c) s += weight_at(w, r, c) * x[c];
  return s;
}

// The activations of x each kind of weight multiplies: Q8_0-style for the 32-weight blocks, Q8_K-style
// for the K-quants; and the AVX-512 kernels' layouts of them, made once per product so that no chunk
// repeats the work (only the kinds some weight needs are filled).
struct MatmulActs {
  QuantizedActs q;
  KQuantActs k;
  std::vector<float> rounded;           // x rounded to BF16, for weights with bf16_activations
  std::vector<float> panel;             // plain weights (pack_panel_acts)
  std::vector<float> panel_rounded;     // the same of `rounded`
  std::vector<uint32_t> bf16_pairs;     // x rounded for the BF16 dot product (pack_panel_acts_bf16)
  std::vector<int32_t> quant[kQTypes];  // per 32-weight block type (pack_quant_acts), by QType
  static int quant_slot(QType t) { return static_cast<int>(t); }
  // The activations w multiplies: x, or x rounded to BF16.
  const float* input(const WeightMatrix& w, const float* x) const { return w.bf16_activations ? rounded.data() : x; }
};

// Whether the AVX512-BF16 kernel computes w's product of n tokens at isa.
bool uses_bf16_dot(const WeightMatrix& w, int64_t n, Isa isa) {
  return w.bf16_activations && n > detail::kDecodeTokens && w.cols % 2 == 0 && bf16_dot_product_used(isa);
}

// Rows [r0, r1) of y for all n tokens, one sequential sum each; a holds x quantized when w is.
void reference_rows(const WeightMatrix& w, const float* x, const MatmulActs& a, int64_t n, float* y, int64_t r0,
                    int64_t r1) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = r0; r < r1; ++r) {
      float& out = y[t * w.rows + r];
      if (is_kquant(w.qtype)) out = kquant_row_dot(w, r, a.k, t);
      else if (w.qtype != QType::None) out = quant_row_dot(w, r, a.q, t);
      else out = float_row_dot(w, r, a.input(w, x) + t * w.cols);
    }
}

// Quantizes x as the weights ws need it, and lays it out for isa's kernels.
void prepare_matmul_acts(std::span<const WeightMatrix* const> ws, const float* x, int64_t n, MatmulActs& a,
                         ThreadPool& pool, Isa isa) {
  // Plain weights: whether some take x as it is, some rounded through the float32 kernels, some by
  // the BF16 dot product.
  bool q = false, k = false, plain = false, plain_rounded = false, bf16_dot = false, packed[kQTypes] = {};
  for (const WeightMatrix* w : ws) {
    k = k || is_kquant(w->qtype);
    if (w->qtype == QType::None) {
      if (uses_bf16_dot(*w, n, isa)) bf16_dot = true;
      else (w->bf16_activations ? plain_rounded : plain) = true;
    }
    if (w->qtype != QType::None && !is_kquant(w->qtype)) q = packed[MatmulActs::quant_slot(w->qtype)] = true;
  }
  if (ws.empty()) return;
  const int64_t cols = ws[0]->cols;
  if (q) quantize_acts(x, n, cols, a.q, pool);
  if (k) quantize_acts_k(x, n, cols, a.k, pool);
  if (plain_rounded) {  // (the BF16 dot product's packing rounds as it packs)
    a.rounded.resize(static_cast<size_t>(n * cols));
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t i = t0 * cols; i < t1 * cols; ++i) a.rounded[static_cast<size_t>(i)] = bf16_to_f32(f32_to_bf16(x[i]));
    });
  }
  if (isa == Isa::Scalar) return;
  if (n > detail::kDecodeTokens) {  // the panel kernels' prefill layouts
    if (bf16_dot) {
      const detail::PanelActsLayout l = detail::kPanelActsBf16;
      a.bf16_pairs.resize(static_cast<size_t>(n * cols / 2));
      pool.parallel_for(detail::panel_pack_pieces(l, n, cols), 1, [&](int64_t p0, int64_t p1) {
        detail::pack_panel_acts_bf16(l, x, n, cols, a.bf16_pairs.data(), p0, p1);
      });
    }
    const detail::PanelActsLayout l = isa == Isa::Avx512 ? detail::kPanelActsAvx512 : detail::kPanelActsAvx2;
    auto pack_floats = [&](const float* from, std::vector<float>& to) {
      to.resize(static_cast<size_t>(n * cols));
      pool.parallel_for(detail::panel_pack_pieces(l, n, cols), 1,
                        [&](int64_t p0, int64_t p1) { detail::pack_panel_acts(l, from, n, cols, to.data(), p0, p1); });
    };
    if (plain) pack_floats(x, a.panel);
    if (plain_rounded) pack_floats(a.rounded.data(), a.panel_rounded);
  }
  if (isa != Isa::Avx512) return;
  for (int slot = 0; slot < kQTypes; ++slot) {
    if (!packed[slot]) continue;
    const QType t = static_cast<QType>(slot);
    std::vector<int32_t>& xp = a.quant[MatmulActs::quant_slot(t)];
    xp.resize(static_cast<size_t>(detail::quant_pack_size(a.q)));
    pool.parallel_for(detail::quant_pack_tiles(a.q), 1,
                      [&](int64_t i0, int64_t i1) { detail::pack_quant_acts(t, a.q, xp.data(), i0, i1); });
  }
}

// Multiply-adds worth a thread hand-off: the least work one chunk of a parallel matmul gets.
constexpr int64_t kMinChunkMacs = 32768;

}  // namespace

bool bf16_dot_product_used(Isa isa) { return isa == Isa::Avx512 && bf16_dot_supported(); }

int64_t weight_bytes(const WeightMatrix& w) {
  if (is_kquant(w.qtype)) return kquant_bytes(w.qtype, w.rows, w.cols);
  if (w.qtype != QType::None) return quantized_bytes(w.qtype, w.rows, w.cols);
  if (w.layout == Layout::Panels) return packed_bytes(w.dtype, w.rows, w.cols);
  return w.rows * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
}

float weight_at(const WeightMatrix& w, int64_t r, int64_t c) {
  return simd::load1(w.data, w.dtype, w.layout == Layout::Panels ? panel_index(w.dtype, w.cols, r, c) : r * w.cols + c);
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

namespace {

void matmul_fused_int8(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa);

// MXFP4's weights are exact small values (E2M1 with a power-of-two scale), and the checkpoints that
// store them (gpt-oss) are meant to run with unrounded activations: one int8 pass would add the
// activations' rounding (~0.4%) to every expert, and logits would stray some 20 times further from the
// unrounded model's than float32 rounding does. So these products take x in kActPasses int8 passes,
// each token kActPasses times in one call (the weights still stream once): x, then each pass's rounding
// residual scaled by kResidualScale (an exact power of two, so that its blocks' float16 scales stay
// normal), and y sums the passes' products scaled back: activations at about 8 bits a pass. Each
// token's sums remain its own, so results do not depend on how many tokens share the call.
constexpr int64_t kActPasses = 3;
constexpr float kResidualScale = 256.0f;

void matmul_passes(std::span<const MatmulOut> outs, const float* x, int64_t n, ThreadPool& pool, Isa isa) {
  const int64_t cols = outs[0].w->cols;
  std::vector<float> xs(static_cast<size_t>(kActPasses * n * cols));
  std::copy_n(x, n * cols, xs.begin());
  QuantizedActs q;
  for (int64_t p = 1; p < kActPasses; ++p) {
    const float* prev = xs.data() + (p - 1) * n * cols;
    float* residual = xs.data() + p * n * cols;
    quantize_acts(prev, n, cols, q, pool);
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t i = t0 * cols; i < t1 * cols; ++i)
        residual[i] = (prev[i] - static_cast<float>(q.q[static_cast<size_t>(i)]) * q.d[static_cast<size_t>(i / kQBlock)]) *
                      kResidualScale;
    });
  }
  std::vector<std::vector<float>> ys(outs.size());
  std::vector<MatmulOut> passes(outs.begin(), outs.end());
  for (size_t i = 0; i < outs.size(); ++i) {
    ys[i].resize(static_cast<size_t>(kActPasses * n * outs[i].w->rows));
    passes[i].y = ys[i].data();
  }
  matmul_fused_int8(passes, xs.data(), kActPasses * n, pool, isa);
  for (size_t i = 0; i < outs.size(); ++i) {
    const int64_t m = n * outs[i].w->rows;
    for (int64_t j = 0; j < m; ++j) {
      float sum = 0.0f;  // the smallest pass first
      for (int64_t p = kActPasses - 1; p >= 0; --p) sum = sum / kResidualScale + ys[i][static_cast<size_t>(p * m + j)];
      outs[i].y[j] = sum;
    }
  }
}

}  // namespace

void matmul_fused(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa) {
  require_isa(isa, "matmul");
  if (n_tokens <= 0 || outs.empty()) return;
  std::vector<MatmulOut> mx, rest;
  for (const MatmulOut& o : outs) (o.w->qtype == QType::MXFP4 ? mx : rest).push_back(o);
  if (mx.empty()) return matmul_fused_int8(outs, x, n_tokens, pool, isa);
  if (!rest.empty()) matmul_fused_int8(rest, x, n_tokens, pool, isa);
  matmul_passes(mx, x, n_tokens, pool, isa);
}

namespace {

void matmul_fused_int8(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool, Isa isa) {
  const int64_t cols = outs[0].w->cols;
  // Work units are 16-row ranges (one quantized group or one panel), numbered across all outputs; in
  // the AVX-512 panel kernel's prefill, whole register tiles of panels, so that no thread's chunk
  // ends in a narrower tile (at 2 threads a quarter of the panels ran in 1-panel tiles).
  static_assert(kPanelRows == kQGroupRows && kKqRows == kQGroupRows, "a work unit is one group or panel of any kind");
  std::vector<int64_t> first(outs.size() + 1, 0), unit(outs.size(), 1), groups(outs.size());
  std::vector<const WeightMatrix*> ws;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].w->cols != cols) fail("matmul", "fused products need weights with the same number of columns");
    if (is_kquant(outs[i].w->qtype) && cols % kQK_K != 0)
      fail("matmul", "K-quant weights need whole super-blocks of 256 columns");
    if (outs[i].w->qtype == QType::None && outs[i].w->layout != Layout::Panels)
      fail("matmul", "plain weights must be packed into panels first (kernels::pack)");
    if (outs[i].w->bf16_activations && (outs[i].w->qtype != QType::None || outs[i].w->dtype != DType::BF16))
      fail("matmul", "BF16-rounded activations are for plain BF16 weights");
    groups[i] = (outs[i].w->rows + kQGroupRows - 1) / kQGroupRows;
    if (isa == Isa::Avx512 && n_tokens > detail::kDecodeTokens && outs[i].w->qtype == QType::None)
      unit[i] = detail::kPanelTile512;
    first[i + 1] = first[i] + (groups[i] + unit[i] - 1) / unit[i];
    ws.push_back(outs[i].w);
  }
  MatmulActs a;
  prepare_matmul_acts(ws, x, n_tokens, a, pool, isa);
  auto rows = [&](const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
    const int64_t r0 = g0 * kQGroupRows, r1 = std::min(w.rows, g1 * kQGroupRows);
    if (isa == Isa::Scalar) {
      reference_rows(w, x, a, n_tokens, y, r0, r1);
    } else if (is_kquant(w.qtype)) {
      // Decode (same bits either way; 256 MiB from memory at one thread, Zen 4, in % of the read probe):
      // the AVX-512 kernel computes faster, and one plane of quants streams on the hardware prefetcher
      // alone (one token: Q4_K 83-89 -> 90-98, IQ4_XS 61 -> 88-94, Q2_K 63 -> 85); one token of a
      // tile's several regions streams best with the AVX2 kernel's software prefetch (Q5_K, Q6_K, Q3_K
      // through the AVX-512 kernel: 23-34% without it, 60-77% with it, against 56-91%). Two tokens take
      // the AVX-512 kernel for every type (AVX2's two passes over each group: 30-44% -> 57-84%).
      if (isa == Isa::Avx512 && (n_tokens > 1 || kq_one_plane(w.qtype)))
        detail::kquant_groups_avx512(w, a.k, y, g0, g1);
      else detail::kquant_groups_avx2(w, a.k, y, g0, g1);
    } else if (w.qtype != QType::None) {
      if (isa == Isa::Avx512) detail::quant_groups_avx512(w, a.q, a.quant[MatmulActs::quant_slot(w.qtype)].data(), y, g0, g1);
      else detail::quant_groups_avx2(w, a.q, y, g0, g1);
    } else if (uses_bf16_dot(w, n_tokens, isa)) {  // plain weights: every panel kernel gives the same bits
      detail::panel_rows_bf16_avx512(w, a.bf16_pairs.data(), n_tokens, y, g0, g1);
    } else {
      const float* xp = (w.bf16_activations ? a.panel_rounded : a.panel).data();
      if (isa == Isa::Avx512) detail::panel_rows_avx512(w, a.input(w, x), xp, n_tokens, y, g0, g1);
      else detail::panel_rows_avx2(w, a.input(w, x), xp, n_tokens, y, g0, g1);
    }
  };
  const int64_t unit_macs = kQGroupRows * cols * n_tokens * *std::max_element(unit.begin(), unit.end());
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(1, unit_macs));
  pool.parallel_for(first.back(), grain, [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t b = std::max(u0, first[i]), e = std::min(u1, first[i + 1]);
      if (b < e) rows(*outs[i].w, outs[i].y, (b - first[i]) * unit[i], std::min(groups[i], (e - first[i]) * unit[i]));
    }
  });
}

}  // namespace

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  if (w.qtype == QType::MXFP4) {  // its passes (matmul_passes), each row's sums in scalar order
    ThreadPool caller(1);
    return matmul(w, x, n_tokens, y, caller, Isa::Scalar);
  }
  MatmulActs a;
  const WeightMatrix* ws[] = {&w};
  ThreadPool caller(1);
  prepare_matmul_acts(ws, x, n_tokens, a, caller, Isa::Scalar);
  reference_rows(w, x, a, n_tokens, y, 0, w.rows);
}

void copy_row(const WeightMatrix& w, int64_t row, float* out) {
  if (is_kquant(w.qtype)) {
    dequantize_kquant_row(w, row, out);
    return;
  }
  if (qhas_min(w.qtype)) {  // ggml's d * q + m, the product rounded first
    for (int64_t c = 0; c < w.cols; ++c) {
      const float scaled = scale_at(w, row, c / kQBlock) * static_cast<float>(quant_at(w, row, c));
      out[c] = scaled + min_at(w, row, c / kQBlock);
    }
    return;
  }
  if (w.qtype != QType::None) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = scale_at(w, row, c / kQBlock) * static_cast<float>(quant_at(w, row, c));
    return;
  }
  for (int64_t c = 0; c < w.cols; ++c) out[c] = weight_at(w, row, c);
}

}  // namespace ember::kernels
