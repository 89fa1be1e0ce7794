#pragma once
// The linear-attention layer of the hybrids (Gated DeltaNet, Qwen3-Next and Qwen3.5): projections of
// the normed input into q, k, v (the conv channels [all q; all k; all v]), z, b and a; a depthwise
// causal conv with SiLU; per-head L2-normalised q (over sqrt(key_dim)) and k; beta = sigmoid(b),
// g = -exp(A_log) softplus(a + dt_bias); the delta rule per value head (value head j reads key head
// j / (value heads / key heads)); RMSNorm of each head's output times silu(z); out_proj.
// The conv window and S of each sequence live in its KvSequence's RecurrentState.
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/safetensors.h"

namespace ember::model {

struct DeltaNetWeights {
  // kGroupedQkvz: in_proj_qkvz, in_proj_ba; kSeparate: in_proj_qkv, _z, _b, _a (rows 0: unused).
  std::array<kernels::WeightMatrix, 4> in;
  kernels::WeightMatrix out;  // out_proj: [hidden][value heads x value_dim]
  std::vector<float> conv;    // [channels][kernel]
  std::vector<float> dt_bias, neg_a;  // per value head; neg_a = -exp(A_log)
  std::vector<float> norm;            // [value_dim], a plain (not 1 + w) weight
};

// A tensor by name and expected shape (failing, naming it, otherwise), and the matrix it binds as.
using RequireTensor = std::function<const TensorInfo&(const std::string&, const std::vector<int64_t>&)>;
using BindTensor = std::function<kernels::WeightMatrix(const TensorInfo&)>;

DeltaNetWeights bind_deltanet(const ModelConfig& c, LinearRule rule, const TensorNames& names, int64_t layer,
                              const RequireTensor& require, const BindTensor& bind);

// One sequence's share of a pass: rows [row, row + count) are its positions [first_pos, first_pos + count).
struct DeltaNetItem {
  KvSequence* seq = nullptr;
  int64_t row = 0, count = 0, first_pos = 0;
};

class GatedDeltaNet {
 public:
  GatedDeltaNet(const ModelConfig& c, LinearRule rule) : c_(c), rule_(rule) {}
  // x: the pass's normed input [n][hidden]; out: [n][hidden] (may be x). Advances each item's state
  // of `layer` and writes the snapshots its RecurrentState::begin_pass made room for.
  void forward(const DeltaNetWeights& w, int64_t layer, const float* x, int64_t n, std::span<const DeltaNetItem> items,
               float* out, kernels::ThreadPool& pool);

 private:
  void project(const DeltaNetWeights& w, const float* x, int64_t n, kernels::ThreadPool& pool);
  void convolve(const DeltaNetWeights& w, int64_t layer, const DeltaNetItem& it);
  const ModelConfig& c_;
  LinearRule rule_;
  std::vector<float> fused_, fused_ba_;      // kGroupedQkvz: the projections as stored
  std::vector<float> mixed_, z_, b_, a_;     // [n][channels], [n][value width], [n][value heads] x 2
  std::vector<float> window_, conv_;         // one sequence's conv input; the pass's conv output [n][channels]
  std::vector<float> decay_, beta_, core_;   // [n][value heads] x 2, [n][value width]
};

}  // namespace ember::model
