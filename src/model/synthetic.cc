#include "model/synthetic.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "base/error.h"
#include "model/config.h"

namespace ember::model {

namespace {

struct Shape {
  const char* name;
  const char* model_type;
  int64_t hidden, layers, heads, kv_heads, intermediate, vocab;
  bool qkv_bias, tied;
  double rope_theta;
  int64_t head_dim;  // 0: hidden / heads
  bool qk_norm;
  int64_t experts, experts_per_tok, moe_intermediate;  // experts 0: dense
};

constexpr Shape kShapes[] = {
    {"llama-1b", "llama", 2048, 16, 32, 8, 8192, 2048, false, true, 500000.0, 0, false, 0, 0, 0},
    {"llama-1b-128k", "llama", 2048, 16, 32, 8, 8192, 128256, false, true, 500000.0, 0, false, 0, 0, 0},
    {"smollm-360m", "llama", 960, 32, 15, 5, 2560, 49152, false, true, 100000.0, 0, false, 0, 0, 0},
    {"qwen-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, true, true, 1000000.0, 0, false, 0, 0, 0},
    // Qwen3-30B-A3B's layers (128 experts of width 768, 8 per token) at 2 of its 48 layers, with a
    // small vocabulary so that the layers' bytes dominate: decode reads 8/128 of the experts.
    {"qwen3-30b-a3b-2l", "qwen3_moe", 2048, 2, 32, 4, 6144, 2048, false, false, 1000000.0, 128, true, 128, 8, 768},
};

// Shapes whose per-layer plan is read from a config.json text (Gemma 4's), as the published
// text_config gives it, at 2 layers of each type and a small vocabulary (the layers' bytes dominate).
// The hybrids (Gated DeltaNet layers beside gated attention) as config.json settings, read by
// parse_config as a folder's are. Qwen3.5-0.8B's published text_config (24 layers, 6 of them full
// attention, tied 248320-token vocabulary); Qwen3.6-35B-A3B's layers (its published text_config:
// 256 experts of 512 with a shared expert of 512, 8 per token; Gated DeltaNet of 16 key / 32 value
// heads of 128) at 2 layers of each kind, model_type qwen3_5_moe as published, with a small
// vocabulary so that the layers' bytes dominate, as qwen3-30b-a3b-2l.
struct ConfigShape {
  const char* name;
  const char* config;
};

constexpr ConfigShape kConfigShapes[] = {
    // gemma-4-E2B: layers [S, F, S, F], the last two reading the first two's keys and values (as its
    // last 20 of 35 layers do) with double-wide MLPs; per-layer embeddings of 256.
    {"gemma-4-e2b-4l", R"({"model_type": "gemma4_text", "hidden_size": 1536, "intermediate_size": 6144,
      "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
      "global_head_dim": 512, "sliding_window": 512, "num_kv_shared_layers": 2, "use_double_wide_mlp": true,
      "hidden_size_per_layer_input": 256, "vocab_size": 2048, "vocab_size_per_layer_input": 2048,
      "final_logit_softcapping": 30.0, "max_position_embeddings": 8192, "bos_token_id": 1, "eos_token_id": 2,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                          "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                             "rope_theta": 1000000.0}}})"},
    // gemma-4-26B-A4B: layers [S, S, F, F]; full layers use the keys as values with 2 kv heads;
    // every layer a dense MLP of 2112 beside 128 experts of 704, 8 per token.
    {"gemma-4-26b-a4b-4l", R"({"model_type": "gemma4_text", "hidden_size": 2816, "intermediate_size": 2112,
      "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
      "global_head_dim": 512, "num_global_key_value_heads": 2, "attention_k_eq_v": true, "sliding_window": 1024,
      "hidden_size_per_layer_input": 0, "enable_moe_block": true, "num_experts": 128, "top_k_experts": 8,
      "moe_intermediate_size": 704, "vocab_size": 2048, "final_logit_softcapping": 30.0,
      "max_position_embeddings": 8192, "bos_token_id": 1, "eos_token_id": 2,
      "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "full_attention"],
      "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                          "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                             "rope_theta": 1000000.0}}})"},
    // gpt-oss-20b's published config at 2 of its 24 layers (one sliding, one full), with a small
    // vocabulary as qwen3-30b-a3b-2l's: 32 experts of 2880 with MXFP4 weights, 4 per token, 64 query and
    // 8 kv heads of 64, biases, sinks, YaRN.
    {"gpt-oss-20b-2l", R"({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
      "num_hidden_layers": 2, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
      "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 2048,
      "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": true,
      "rope_theta": 150000, "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
      "truncate": false, "original_max_position_embeddings": 4096}, "max_position_embeddings": 131072,
      "rms_norm_eps": 1e-05, "swiglu_limit": 7.0, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
      "quantization_config": {"quant_method": "mxfp4"}})"},
    {"qwen3.5-0.8b", R"({"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": {
       "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 24, "num_attention_heads": 8,
       "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320, "rms_norm_eps": 1e-6,
       "max_position_embeddings": 262144, "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
       "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
       "linear_num_value_heads": 16, "eos_token_id": 248044,
       "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}}})"},
    {"qwen3.6-35b-a3b-4l", R"({"model_type": "qwen3_5_moe", "tie_word_embeddings": false, "text_config": {
       "hidden_size": 2048, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 16,
       "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 2048, "rms_norm_eps": 1e-6,
       "max_position_embeddings": 262144,
       "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
       "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
       "linear_num_key_heads": 16, "linear_num_value_heads": 32, "num_experts": 256, "num_experts_per_tok": 8,
       "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
       "eos_token_id": 248044,
       "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}}})"},
};

// splitmix64: a fast generator whose streams are independent per seed.
inline uint64_t mix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A tensor of n elements of `elem_bytes` each, element i written by put(out, i, s) with s the
// splitmix64 state of its 65536-element chunk (so the values do not depend on the thread count).
template <class Put>
void add_random(InMemoryWeights& w, const std::string& name, std::vector<int64_t> shape, DType dtype, bool u8,
                uint64_t seed, kernels::ThreadPool& pool, Put&& put) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * (u8 ? 1 : dtype_size(dtype)));
  uint8_t* out = bytes.data();
  constexpr int64_t kChunk = 1 << 16;
  pool.parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      uint64_t s = seed * 0x100000001B3ull + static_cast<uint64_t>(c);
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) put(out, i, s);
    }
  });
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.u8 = u8;
  t.shape = std::move(shape);
  t.data = bytes.data();
  t.size_bytes = bytes.size();
  t.file = "synthetic";
  w.data[name] = std::move(bytes);
  w.tensors[name] = std::move(t);
}

void add_tensor(InMemoryWeights& w, const std::string& name, std::vector<int64_t> shape, DType dtype, float range,
                uint64_t seed, kernels::ThreadPool& pool) {
  add_random(w, name, std::move(shape), dtype, false, seed, pool, [&](uint8_t* out, int64_t i, uint64_t& s) {
    // range < 0 means a constant |range| (norm weights).
    const float u = static_cast<float>(mix(s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    const float v = range < 0 ? -range : u * range;
    switch (dtype) {
      case DType::F32: std::memcpy(out + i * 4, &v, 4); break;
      case DType::F16: { const uint16_t h = f32_to_f16(v); std::memcpy(out + i * 2, &h, 2); break; }
      case DType::BF16: { const uint16_t h = f32_to_bf16(v); std::memcpy(out + i * 2, &h, 2); break; }
    }
  });
}

// Random bytes in [lo, hi] as a U8 tensor (MXFP4 blocks and scales).
void add_bytes(InMemoryWeights& w, const std::string& name, std::vector<int64_t> shape, int lo, int hi, uint64_t seed,
               kernels::ThreadPool& pool) {
  add_random(w, name, std::move(shape), DType::F32, true, seed, pool, [&](uint8_t* out, int64_t i, uint64_t& s) {
    out[i] = static_cast<uint8_t>(lo + static_cast<int>(mix(s) % static_cast<uint64_t>(hi - lo + 1)));
  });
}

// gpt-oss's experts as its checkpoints store them: fused gate_up [E][H][2I] and down [E][I][H] with
// biases, or MXFP4 blocks and scales (scales 2^-8..2^-4: weights of at most 0.75).
template <class Stacked, class Vec>
void fused_expert_tensors(const ModelConfig& c, const TensorNames& names, int64_t l, Stacked& stacked, Vec& vec,
                          InMemoryWeights& w, uint64_t& k, kernels::ThreadPool& pool) {
  const int64_t H = c.hidden_size, E = c.moe.num_experts, I = c.moe.intermediate_size;
  const std::string gate_up = names.layer(l, std::string(names.expert_prefix) + std::string(names.expert_matrices[0]), "");
  const std::string down = names.layer(l, std::string(names.expert_prefix) + std::string(names.expert_matrices[2]), "");
  vec(gate_up + "_bias", E * 2 * I, 0.1f);
  vec(down + "_bias", E * H, 0.1f);
  w.tensors[gate_up + "_bias"].shape = {E, 2 * I};
  w.tensors[down + "_bias"].shape = {E, H};
  if (!c.moe.mxfp4) {
    stacked(gate_up, E, H, 2 * I);
    stacked(down, E, I, H);
    return;
  }
  for (const auto& [stem, out, in] : {std::tuple{gate_up, 2 * I, H}, std::tuple{down, H, I}}) {
    add_bytes(w, stem + "_blocks", {E, out, in / 32, 16}, 0, 255, ++k, pool);
    add_bytes(w, stem + "_scales", {E, out, in / 32}, 120, 124, ++k, pool);
  }
}

// Gemma 4's per-layer embedding table, its projection and norm.
template <class Mat, class Vec>
void gemma4_model_tensors(const ModelConfig& c, const Gemma4Names& g, Mat& mat, Vec& vec) {
  const int64_t LP = c.num_hidden_layers * c.per_layer_input;
  mat(std::string(g.ple_table), c.per_layer_vocab, LP);
  mat(std::string(g.ple_projection), LP, c.hidden_size);
  vec(std::string(g.ple_norm), c.per_layer_input, -1.0f);
}

// A Gemma 4 layer's own tensors: layer_scalar, the per-layer embedding's gate, and the experts beside
// the dense MLP with their router and norms.
template <class Mat, class Stacked, class Vec>
void gemma4_layer_tensors(const ModelConfig& c, const Gemma4Names& g, const TensorNames& names, int64_t l, Mat& mat,
                          Stacked& stacked, Vec& vec) {
  const int64_t H = c.hidden_size, P = c.per_layer_input;
  vec(names.layer(l, g.layer_scalar, ""), 1, -1.0f);
  if (P > 0) {
    mat(names.layer(l, g.ple_gate), P, H);
    mat(names.layer(l, g.ple_layer_projection), H, P);
    vec(names.layer(l, g.ple_post_norm), H, -1.0f);
  }
  if (!c.moe.beside_dense) return;
  const int64_t E = c.moe.num_experts, I = c.moe.intermediate_size;
  mat(names.layer(l, names.router), E, H);
  vec(names.layer(l, g.router_scale, ""), H, -1.0f);
  vec(names.layer(l, g.expert_scale, ""), E, -1.0f);
  const std::string prefix(names.expert_prefix);
  stacked(names.layer(l, prefix + std::string(names.stacked_experts[0]), ""), E, 2 * I, H);
  stacked(names.layer(l, prefix + std::string(names.stacked_experts[1]), ""), E, H, I);
  for (std::string_view norm : {g.expert_norm, g.dense_out_norm, g.experts_out_norm}) vec(names.layer(l, norm), H, -1.0f);
}

}  // namespace

std::vector<std::string> synthetic_shape_names() {
  std::vector<std::string> out;
  for (const Shape& s : kShapes) out.push_back(s.name);
  for (const ConfigShape& s : kConfigShapes) out.push_back(s.name);
  return out;
}

ModelConfig synthetic_config(const std::string& name) {
  for (const ConfigShape& s : kConfigShapes)
    if (name == s.name) return parse_config(s.config, "synthetic shape " + name);
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    ModelConfig c;
    c.model_type = s.model_type;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.intermediate;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = s.head_dim > 0 ? s.head_dim : s.hidden / s.heads;
    c.qk_norm = s.qk_norm;
    c.vocab_size = s.vocab;
    c.max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-5;
    c.rope.theta = s.rope_theta;
    c.tie_word_embeddings = s.tied;
    c.qkv_bias = s.qkv_bias;
    c.layers.assign(static_cast<size_t>(s.layers), LayerSpec{});
    if (s.experts > 0) {
      c.moe = MoeConfig{s.experts, s.experts_per_tok, s.moe_intermediate, true};
      for (LayerSpec& l : c.layers) l.sparse_mlp = true;
    }
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    return c;
  }
  std::string known;
  for (const std::string& s : synthetic_shape_names()) known += (known.empty() ? "" : ", ") + s;
  fail("synthetic model", "unknown shape '" + name + "' (known: " + known + ")");
}

InMemoryWeights synthetic_weights(const ModelConfig& c, DType dtype, uint64_t seed, kernels::ThreadPool& pool) {
  InMemoryWeights w;
  const int64_t H = c.hidden_size;
  uint64_t k = seed;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    add_tensor(w, name, {rows, cols}, dtype, std::sqrt(3.0f / static_cast<float>(cols)), ++k, pool);
  };
  auto vec = [&](const std::string& name, int64_t n, float range) { add_tensor(w, name, {n}, DType::F32, range, ++k, pool); };
  auto stacked = [&](const std::string& name, int64_t n, int64_t rows, int64_t cols) {  // n matrices in one tensor
    add_tensor(w, name, {n, rows, cols}, dtype, std::sqrt(3.0f / static_cast<float>(cols)), ++k, pool);
  };
  const Architecture* arch = find_architecture(c.model_type);
  const TensorNames& names = arch != nullptr ? *arch->names : kHuggingFaceNames;
  // A Gated DeltaNet layer's projections in the architecture's layout, conv, gates and norm.
  auto linear_attention_tensors = [&](int64_t l) {
    const LinearAttentionConfig& a = c.linear;
    const int64_t K = a.key_width(), V = a.value_width(), nv = a.value_heads;
    const TensorNames::Linear& n = names.linear;
    if (arch->linear == LinearRule::kGroupedQkvz) {
      mat(names.layer(l, n.qkvz), 2 * K + 2 * V, H);
      mat(names.layer(l, n.ba), 2 * nv, H);
    } else {
      mat(names.layer(l, n.qkv), a.conv_channels(), H);
      mat(names.layer(l, n.z), V, H);
      mat(names.layer(l, n.b), nv, H);
      mat(names.layer(l, n.a), nv, H);
    }
    mat(names.layer(l, n.out), H, V);
    add_tensor(w, names.layer(l, n.conv), {a.conv_channels(), 1, a.conv_kernel}, dtype,
               std::sqrt(3.0f / static_cast<float>(a.conv_kernel)), ++k, pool);
    vec(names.layer(l, n.dt_bias, ""), nv, 1.0f);
    vec(names.layer(l, n.a_log, ""), nv, 1.0f);
    vec(names.layer(l, n.norm), a.value_dim, -1.0f);
  };
  mat(std::string(names.embed), c.vocab_size, H);
  if (!c.tie_word_embeddings) mat(std::string(names.lm_head), c.vocab_size, H);
  vec(std::string(names.final_norm), H, -1.0f);
  if (c.per_layer_input > 0) gemma4_model_tensors(c, *names.gemma4, mat, vec);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerSpec& spec = c.layers[static_cast<size_t>(l)];
    vec(names.layer(l, names.attn_norm), H, -1.0f);
    vec(names.layer(l, names.mlp_norm), H, -1.0f);
    if (c.post_norms) {
      vec(names.layer(l, names.post_attn_norm), H, -1.0f);
      vec(names.layer(l, names.post_mlp_norm), H, -1.0f);
    }
    const bool sparse = spec.sparse_mlp && !c.moe.beside_dense;
    const bool linear = spec.kind == LayerKind::kLinear;
    if (linear) linear_attention_tensors(l);
    for (LayerMatrix m : kAllLayerMatrices) {
      const bool mlp = m == LayerMatrix::kGate || m == LayerMatrix::kUp || m == LayerMatrix::kDown;
      if ((sparse && mlp) || (linear && !mlp)) continue;
      if ((m == LayerMatrix::kK || m == LayerMatrix::kV) && spec.kv_source >= 0) continue;  // reads another's
      if (m == LayerMatrix::kV && spec.k_eq_v) continue;
      const auto [rows, cols] = c.shape(m, static_cast<size_t>(l));
      mat(names.matrix(l, m), rows, cols);
      if (c.has_bias(m)) vec(names.matrix(l, m, ".bias"), rows, 0.1f);
    }
    if (c.attention_sinks) vec(names.layer(l, names.sinks, ""), c.num_attention_heads, 1.0f);
    if (names.gemma4 != nullptr) {
      gemma4_layer_tensors(c, *names.gemma4, names, l, mat, stacked, vec);
    } else if (sparse && names.fused_experts) {
      mat(names.layer(l, names.router), c.moe.num_experts, H);
      vec(names.layer(l, names.router, ".bias"), c.moe.num_experts, 0.1f);
      fused_expert_tensors(c, names, l, stacked, vec, w, k, pool);
    } else if (sparse) {
      const int64_t I = c.moe.intermediate_size;
      mat(names.layer(l, names.router), c.moe.num_experts, H);
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        mat(names.expert(l, e, 0), I, H);
        mat(names.expert(l, e, 1), I, H);
        mat(names.expert(l, e, 2), H, I);
      }
      if (const int64_t SI = c.moe.shared_intermediate_size; SI > 0) {
        const std::string stem = std::string(names.shared_expert) + ".";
        mat(names.layer(l, stem + std::string(names.expert_matrices[0])), SI, H);
        mat(names.layer(l, stem + std::string(names.expert_matrices[1])), SI, H);
        mat(names.layer(l, stem + std::string(names.expert_matrices[2])), H, SI);
        mat(names.layer(l, names.shared_expert_gate), 1, H);
      }
    }
    if (c.qk_norm && !linear) {
      vec(names.layer(l, names.q_norm), c.head_dim_of(static_cast<size_t>(l)), -1.0f);
      if (spec.kv_source < 0) vec(names.layer(l, names.k_norm), c.head_dim_of(static_cast<size_t>(l)), -1.0f);
    }
  }
  return w;
}

std::unique_ptr<Model> make_synthetic_model(const std::string& shape, DType dtype, const LoadOptions& options,
                                            uint64_t seed) {
  ModelConfig c = synthetic_config(shape);
  if (options.progress) options.progress("generating random " + std::string(dtype_name(dtype)) + " weights for " + shape);
  kernels::ThreadPool pool(options.threads);
  InMemoryWeights w = synthetic_weights(c, dtype, seed, pool);
  return Model::from_memory(std::move(c), std::move(w), options);
}

}  // namespace ember::model
