#include "model/gated_deltanet.h"

#include <algorithm>
#include <cmath>

#include "kernels/causal_conv.h"
#include "kernels/delta_rule.h"
#include "kernels/ops.h"

namespace ember::model {

namespace {

std::vector<float> floats(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::copy_row(kernels::WeightMatrix{t.data, t.dtype, 1, t.numel()}, 0, out.data());
  return out;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// PyTorch's softplus (threshold 20: linear above it).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / sqrt(sum x^2 + 1e-6) over each of `heads` rows of `dim`, times `scale` (transformers' l2norm).
void l2_normalize(float* x, int64_t heads, int64_t dim, float scale) {
  for (int64_t h = 0; h < heads; ++h) {
    float* r = x + h * dim;
    float ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += r[i] * r[i];
    const float inv = scale / std::sqrt(ss + 1e-6f);
    for (int64_t i = 0; i < dim; ++i) r[i] *= inv;
  }
}

}  // namespace

DeltaNetWeights bind_deltanet(const ModelConfig& c, LinearRule rule, const TensorNames& names, int64_t l,
                              const RequireTensor& require, const BindTensor& bind) {
  const LinearAttentionConfig& a = c.linear;
  const int64_t H = c.hidden_size, K = a.key_width(), V = a.value_width(), nv = a.value_heads, C = a.conv_channels();
  const TensorNames::Linear& n = names.linear;
  DeltaNetWeights w;
  if (rule == LinearRule::kGroupedQkvz) {
    w.in[0] = bind(require(names.layer(l, n.qkvz), {2 * K + 2 * V, H}));
    w.in[1] = bind(require(names.layer(l, n.ba), {2 * nv, H}));
  } else {
    w.in[0] = bind(require(names.layer(l, n.qkv), {C, H}));
    w.in[1] = bind(require(names.layer(l, n.z), {V, H}));
    w.in[2] = bind(require(names.layer(l, n.b), {nv, H}));
    w.in[3] = bind(require(names.layer(l, n.a), {nv, H}));
  }
  w.out = bind(require(names.layer(l, n.out), {H, V}));
  w.conv = floats(require(names.layer(l, n.conv), {C, 1, a.conv_kernel}));
  w.dt_bias = floats(require(names.layer(l, n.dt_bias, ""), {nv}));
  w.neg_a = floats(require(names.layer(l, n.a_log, ""), {nv}));
  for (float& v : w.neg_a) v = -std::exp(v);
  w.norm = floats(require(names.layer(l, n.norm), {a.value_dim}));
  return w;
}

// The projections into mixed_ ([all q; all k; all v]), z_, b_ and a_. Qwen3-Next's fused rows are
// grouped per key head, [q, k, v (r heads), z (r heads)] and [b (r), a (r)]: regrouped here.
void GatedDeltaNet::project(const DeltaNetWeights& w, const float* x, int64_t n, kernels::ThreadPool& pool) {
  const LinearAttentionConfig& a = c_.linear;
  const int64_t K = a.key_width(), V = a.value_width(), nv = a.value_heads, C = a.conv_channels();
  mixed_.resize(static_cast<size_t>(n * C));
  z_.resize(static_cast<size_t>(n * V));
  b_.resize(static_cast<size_t>(n * nv));
  a_.resize(static_cast<size_t>(n * nv));
  if (rule_ == LinearRule::kSeparate) {
    const kernels::MatmulOut outs[4] = {{&w.in[0], mixed_.data()}, {&w.in[1], z_.data()}, {&w.in[2], b_.data()},
                                        {&w.in[3], a_.data()}};
    kernels::matmul_fused(outs, x, n, pool);
    return;
  }
  fused_.resize(static_cast<size_t>(n * (2 * K + 2 * V)));
  fused_ba_.resize(static_cast<size_t>(n * 2 * nv));
  const kernels::MatmulOut outs[2] = {{&w.in[0], fused_.data()}, {&w.in[1], fused_ba_.data()}};
  kernels::matmul_fused(outs, x, n, pool);
  const int64_t nk = a.key_heads, dk = a.key_dim, r = nv / nk, rv = r * a.value_dim;
  for (int64_t t = 0; t < n; ++t) {
    const float* src = fused_.data() + t * (2 * K + 2 * V);
    float* m = mixed_.data() + t * C;
    for (int64_t g = 0; g < nk; ++g) {
      const float* s = src + g * (2 * dk + 2 * rv);
      std::copy_n(s, dk, m + g * dk);
      std::copy_n(s + dk, dk, m + K + g * dk);
      std::copy_n(s + 2 * dk, rv, m + 2 * K + g * rv);
      std::copy_n(s + 2 * dk + rv, rv, z_.data() + t * V + g * rv);
      const float* ba = fused_ba_.data() + t * 2 * nv + g * 2 * r;
      std::copy_n(ba, r, b_.data() + t * nv + g * r);
      std::copy_n(ba + r, r, a_.data() + t * nv + g * r);
    }
  }
}

// One sequence's conv over its rows of mixed_ into conv_, its window carried in and out of its state
// (and copied into the snapshots of this pass's block boundaries).
void GatedDeltaNet::convolve(const DeltaNetWeights& w, int64_t layer, const DeltaNetItem& it) {
  const int64_t C = c_.linear.conv_channels(), W = c_.linear.conv_kernel - 1;
  RecurrentState& st = it.seq->state();
  float* win = st.conv(layer);
  window_.resize(static_cast<size_t>((W + it.count) * C));
  std::copy_n(win, W * C, window_.data());
  std::copy_n(mixed_.data() + it.row * C, it.count * C, window_.data() + W * C);
  kernels::causal_conv_silu(window_.data(), w.conv.data(), it.count, C, c_.linear.conv_kernel, conv_.data() + it.row * C);
  std::copy_n(window_.data() + it.count * C, W * C, win);
  for (int64_t t = 1; t <= it.count; ++t)
    if (float* snap = st.snapshot_at(it.first_pos + t, layer)) std::copy_n(window_.data() + t * C, W * C, snap);
}

void GatedDeltaNet::forward(const DeltaNetWeights& w, int64_t layer, const float* x, int64_t n,
                            std::span<const DeltaNetItem> items, float* out, kernels::ThreadPool& pool) {
  const LinearAttentionConfig& a = c_.linear;
  const int64_t K = a.key_width(), V = a.value_width(), nk = a.key_heads, nv = a.value_heads, dk = a.key_dim,
                dv = a.value_dim, C = a.conv_channels();
  project(w, x, n, pool);
  conv_.resize(static_cast<size_t>(n * C));
  for (const DeltaNetItem& it : items) convolve(w, layer, it);
  decay_.resize(static_cast<size_t>(n * nv));
  beta_.resize(static_cast<size_t>(n * nv));
  for (int64_t t = 0; t < n; ++t) {
    float* row = conv_.data() + t * C;
    l2_normalize(row, nk, dk, 1.0f / std::sqrt(static_cast<float>(dk)));
    l2_normalize(row + K, nk, dk, 1.0f);
    for (int64_t h = 0; h < nv; ++h) {
      const size_t i = static_cast<size_t>(t * nv + h);
      beta_[i] = sigmoid(b_[i]);
      decay_[i] = std::exp(w.neg_a[static_cast<size_t>(h)] * softplus(a_[i] + w.dt_bias[static_cast<size_t>(h)]));
    }
  }
  // Each (sequence, value head) runs its positions in order on one thread; S is copied into the
  // snapshots at the block boundaries this pass keeps.
  core_.resize(static_cast<size_t>(n * V));
  const int64_t heads = static_cast<int64_t>(items.size()) * nv, S = dk * dv, W = (a.conv_kernel - 1) * C;
  pool.parallel_for(heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const DeltaNetItem& it = items[static_cast<size_t>(job / nv)];
      const int64_t h = job % nv;
      float* state = it.seq->state().matrix(layer) + h * S;
      int64_t done = 0;
      while (done < it.count) {
        // Up to the next kept snapshot, else to the end of the item.
        int64_t stop = done + 1;
        float* snap = nullptr;
        for (; stop <= it.count; ++stop)
          if ((snap = it.seq->state().snapshot_at(it.first_pos + stop, layer)) != nullptr || stop == it.count) break;
        const int64_t t0 = it.row + done;
        kernels::DeltaRuleHead in;
        in.q = conv_.data() + t0 * C + a.key_head_of(h) * dk;
        in.k = conv_.data() + t0 * C + K + a.key_head_of(h) * dk;
        in.qk_stride = C;
        in.v = conv_.data() + t0 * C + 2 * K + h * dv;
        in.v_stride = C;
        in.decay = decay_.data() + t0 * nv + h;
        in.beta = beta_.data() + t0 * nv + h;
        in.gate_stride = nv;
        in.out = core_.data() + t0 * V + h * dv;
        in.out_stride = V;
        kernels::delta_rule(state, dk, dv, in, stop - done);
        if (snap != nullptr) std::copy_n(state, S, snap + W + h * S);
        done = stop;
      }
    }
  });
  // The gated RMSNorm: each head's output normed (plain weight) times silu(z).
  kernels::rms_norm(core_.data(), w.norm.data(), n * nv, dv, static_cast<float>(c_.rms_norm_eps), core_.data());
  for (int64_t i = 0; i < n * V; ++i) core_[static_cast<size_t>(i)] *= z_[static_cast<size_t>(i)] * sigmoid(z_[static_cast<size_t>(i)]);
  kernels::matmul(w.out, core_.data(), n, out, pool);
}

}  // namespace ember::model
