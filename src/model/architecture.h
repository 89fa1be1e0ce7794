#pragma once
// The table of supported architectures: what each model_type changes in the one shared forward pass,
// as named data. A new architecture is an entry here (and, for a new kind of layer, a field), never a
// branch in the forward pass or a copy of it.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::model {

// Gemma 4's tensors beyond the common ones.
struct Gemma4Names {
  // The per-layer embeddings: the table, the projection of the token embedding and its norm (full
  // names), and each layer's input gate, projection and norm (stems).
  std::string_view ple_table, ple_projection, ple_norm;
  std::string_view ple_gate, ple_layer_projection, ple_post_norm;
  std::string_view layer_scalar;  // a layer's residual scale (a stem with no suffix)
  // The experts beside the dense MLP: the router's input scale and per-expert scale (stems with no
  // suffix); the experts' input norm, and the norms of the dense and expert outputs before their sum.
  std::string_view router_scale, expert_scale;
  std::string_view expert_norm, dense_out_norm, experts_out_norm;
};

// The weight matrices of one decoder layer, in the order the forward pass uses them.
enum class LayerMatrix : uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown };
constexpr size_t kLayerMatrices = 7;
constexpr std::array<LayerMatrix, kLayerMatrices> kAllLayerMatrices = {
    LayerMatrix::kQ, LayerMatrix::kK, LayerMatrix::kV, LayerMatrix::kO, LayerMatrix::kGate, LayerMatrix::kUp,
    LayerMatrix::kDown};

// Where a checkpoint keeps each tensor. A layer's tensor is layer_prefix + index + "." + stem, then
// ".weight" or ".bias".
struct TensorNames {
  std::string_view embed, lm_head, final_norm;  // full names
  std::string_view layer_prefix;
  std::string_view attn_norm, mlp_norm, q_norm, k_norm;  // stems of the layer's vectors
  // Norms of the attention output and of the MLP output before their residual adds (Gemma); "": none.
  std::string_view post_attn_norm, post_mlp_norm;
  std::array<std::string_view, kLayerMatrices> matrices;  // stems, indexed by LayerMatrix
  // Fused projections split at load (Phi-3): rows q, k, v and rows gate, up; "": stored apart.
  std::string_view fused_qkv, fused_gate_up;
  // Mixtures of experts: the router's stem, and expert E's gate/up/down at expert_prefix + E + "." + stem.
  std::string_view router, expert_prefix;
  std::array<std::string_view, 3> expert_matrices;  // gate, up, down
  // The same experts stacked, as transformers 5 saves them: expert_prefix + stacked_experts[0]
  // [E][2I][hidden] (each expert's gate rows, then its up rows) and + stacked_experts[1] [E][hidden][I],
  // bound as row blocks: always where expert_matrices is empty (Gemma 4), else where a checkpoint holds
  // them instead of one tensor per expert (Qwen3.5's MoE); "": never.
  std::array<std::string_view, 2> stacked_experts = {};
  // gpt-oss: all experts in one tensor each, expert_prefix + expert_matrices[0] ([E][hidden][2I],
  // input-major, gate and up interleaved by column) and + expert_matrices[2] ([E][I][hidden]), with
  // "_bias" tensors beside them; split and transposed at load.
  bool fused_experts = false;
  // Per-head attention sink logits (gpt-oss), a full name's stem; "": none.
  std::string_view sinks;
  // The prefix transformers' *ForCausalLM wrapper puts before the base model's tensors (all but
  // lm_head). A checkpoint of the base model alone (sentence-transformers' Qwen3-Embedding) stores
  // them without it; "": none to drop.
  std::string_view base_prefix;
  // Gemma 4's tensors beyond these (model/layer_plan.h); null: none.
  const struct Gemma4Names* gemma4 = nullptr;
  // Gated DeltaNet layers' stems (Qwen3-Next stores in_proj_qkvz and in_proj_ba, Qwen3.5 in_proj_qkv,
  // _z, _b and _a: see LinearRule); "": no such layers.
  struct Linear {
    std::string_view qkvz, ba, qkv, z, b, a, conv, dt_bias, a_log, norm, out;
  } linear = {};
  // Qwen3-Next's shared expert: its gate/up/down at shared_expert + "." + expert_matrices[i], and the
  // stem of its [1][hidden] sigmoid gate; "": none.
  std::string_view shared_expert = "", shared_expert_gate = "";

  std::string layer(int64_t index, std::string_view stem, std::string_view suffix = ".weight") const;
  std::string matrix(int64_t index, LayerMatrix m, std::string_view suffix = ".weight") const {
    return layer(index, matrices[static_cast<size_t>(m)], suffix);
  }
  // Expert `e`'s matrix `which` (0 gate, 1 up, 2 down) of layer `index` (suffix ".bias": its bias).
  std::string expert(int64_t index, int64_t e, size_t which, std::string_view suffix = ".weight") const;
  // `name` as a checkpoint of the base model alone stores it (base_prefix dropped).
  std::string_view without_base_prefix(std::string_view name) const {
    return !base_prefix.empty() && name.starts_with(base_prefix) ? name.substr(base_prefix.size()) : name;
  }
};

// Hugging Face's names (transformers' Llama, Mistral, Qwen2 and Qwen3 modules).
extern const TensorNames kHuggingFaceNames;
// Gemma 2 / 3: four norms per layer (post_attention_layernorm is the attention output's norm there).
extern const TensorNames kGemmaNames;
// Phi-3: qkv_proj and gate_up_proj.
extern const TensorNames kPhi3Names;
// Qwen3-MoE (mlp.gate, mlp.experts.E.*_proj) and Mixtral (block_sparse_moe.gate, experts.E.w1/w3/w2).
extern const TensorNames kQwenMoeNames;
extern const TensorNames kMixtralNames;
// gpt-oss: mlp.router, mlp.experts.{gate_up_proj,down_proj} fused over experts, self_attn.sinks.
extern const TensorNames kGptOssNames;
// Gemma 4 (Gemma4ForConditionalGeneration: the text model under model.language_model.) and its text
// model alone (Gemma4ForCausalLM: under model.).
extern const TensorNames kGemma4Names;
extern const TensorNames kGemma4TextNames;
// Qwen3-Next (model.layers.N.linear_attn.in_proj_qkvz, mlp.shared_expert) and Qwen3.5's text model
// (model.language_model.layers.N.linear_attn.in_proj_qkv; its vision tower and mtp.* are not read).
extern const TensorNames kQwen3NextNames;
extern const TensorNames kQwen35Names;
// llama.cpp's GGUF names of a dense layer (model/gguf_architecture.cc derives Gemma's and the experts' from them).
extern const TensorNames kGgufNames;

// Which layers attend within a sliding window.
enum class WindowRule : uint8_t {
  kNone,           // every layer attends to the whole context
  kAllLayers,      // mistral: every layer uses `sliding_window` when it is set
  kFromMaxWindow,  // qwen2/qwen3: only with use_sliding_window, and only layers >= max_window_layers
  kGemma,          // layer_types, else Gemma 2's even layers or Gemma 3's sliding_window_pattern
  kAlternating,    // gpt-oss: layer_types, else the even layers (transformers' GptOssConfig default)
  kGemma4,         // layer_types, else every 6th layer full and the last full; sliding_window 512
};

// How a layer's MLP is chosen when the model has experts.
enum class MoeRule : uint8_t {
  kNone,     // dense MLPs only
  kQwen,     // num_experts, norm_topk_prob, mlp_only_layers and decoder_sparse_step
  kMixtral,  // num_local_experts, every layer sparse, top-k weights always renormalised
  // gpt-oss: as Mixtral, with router and expert biases and the clamped SwiGLU of swiglu_limit
  kGptOss,
  // Gemma 4: enable_moe_block, num_experts, top_k_experts, moe_intermediate_size; experts beside the
  // dense MLP on every layer
  kGemma4,
};

// Which attention projections carry biases.
enum class BiasRule : uint8_t {
  kNone,           // mistral: never
  kQkv,            // qwen2: q, k and v always, o never
  kAttentionBias,  // llama, qwen3: q, k, v and o when config.json's attention_bias is true
};

// How a hybrid's linear-attention (Gated DeltaNet) projections are stored; kNone: every layer attends.
// The layers are chosen by layer_types, else by full_attention_interval.
enum class LinearRule : uint8_t {
  kNone,
  // Qwen3-Next: in_proj_qkvz rows grouped per key head [q, k, v (r heads), z (r heads)], in_proj_ba
  // rows [b (r), a (r)] per key head, r = value heads / key heads.
  kGroupedQkvz,
  kSeparate,  // Qwen3.5: in_proj_qkv rows [all q; all k; all v], in_proj_z, in_proj_b, in_proj_a
};

struct Architecture {
  std::string_view model_type;
  const TensorNames* names;
  BiasRule bias;
  bool qk_norm;  // per-head RMSNorm of q and k before RoPE (qwen3)
  WindowRule window;
  // Gemma: RMSNorm scales by (1 + weight), embeddings are multiplied by sqrt(hidden_size), and the
  // config's query_pre_attn_scalar and soft-capping apply.
  bool gemma_norms = false;
  bool local_rope = false;       // Gemma 3: sliding layers rotate with rope_local_base_freq, unscaled
  bool no_rope_layers = false;   // SmolLM3: config.json's no_rope_layers (0: the layer skips RoPE)
  bool partial_rotary = false;   // Phi-3: partial_rotary_factor
  MoeRule moe = MoeRule::kNone;
  // The hybrids (Qwen3-Next, Qwen3.5): Gated DeltaNet layers beside gated attention (q_proj yields
  // [query | gate] per head) whose RMSNorms scale by (1 + weight), with no Gemma scaling.
  LinearRule linear = LinearRule::kNone;
  // partial_rotary_factor where config.json gives none (with partial_rotary), and head_dim (0:
  // hidden_size / num_attention_heads), as transformers' config classes default them.
  double rotary_factor_default = 1.0;
  int64_t head_dim_default = 0;
  // Gemma 4: the per-layer plan of model/layer_plan.h (head dims and kv heads by layer type, keys as
  // values, KV sharing, double-wide MLPs, per-layer embeddings), plain-weight norms, a weightless
  // value norm, unscaled scores.
  bool layer_plan = false;
  // The config.json object holding the text model's fields ("": the top level): Gemma 4's and
  // Qwen3.5's text_config.
  std::string_view text_config = "";
  bool tied_by_default = false;  // tie_word_embeddings when config.json does not say
};

const Architecture* find_architecture(std::string_view model_type);
std::string supported_architectures();  // every model_type of the table, comma-separated

}  // namespace ember::model
