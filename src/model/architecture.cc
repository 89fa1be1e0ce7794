#include "model/architecture.h"

namespace ember::model {

const TensorNames kHuggingFaceNames{
    .embed = "model.embed_tokens.weight",
    .lm_head = "lm_head.weight",
    .final_norm = "model.norm.weight",
    .layer_prefix = "model.layers.",
    .attn_norm = "input_layernorm",
    .mlp_norm = "post_attention_layernorm",
    .q_norm = "self_attn.q_norm",
    .k_norm = "self_attn.k_norm",
    .post_attn_norm = "",
    .post_mlp_norm = "",
    .matrices = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj"},
    .fused_qkv = "",
    .fused_gate_up = "",
    .router = "",
    .expert_prefix = "",
    .expert_matrices = {},
    .fused_experts = false,
    .sinks = "",
    .base_prefix = "model.",
    .gemma4 = nullptr,
};

const TensorNames kGemmaNames = [] {
  TensorNames n = kHuggingFaceNames;
  n.mlp_norm = "pre_feedforward_layernorm";
  n.post_attn_norm = "post_attention_layernorm";
  n.post_mlp_norm = "post_feedforward_layernorm";
  return n;
}();

const TensorNames kPhi3Names = [] {
  TensorNames n = kHuggingFaceNames;
  n.fused_qkv = "self_attn.qkv_proj";
  n.fused_gate_up = "mlp.gate_up_proj";
  return n;
}();

const TensorNames kQwenMoeNames = [] {
  TensorNames n = kHuggingFaceNames;
  n.router = "mlp.gate";
  n.expert_prefix = "mlp.experts.";
  n.expert_matrices = {"gate_proj", "up_proj", "down_proj"};
  return n;
}();

const TensorNames kMixtralNames = [] {
  TensorNames n = kHuggingFaceNames;
  n.router = "block_sparse_moe.gate";
  n.expert_prefix = "block_sparse_moe.experts.";
  n.expert_matrices = {"w1", "w3", "w2"};
  return n;
}();

const TensorNames kGptOssNames = [] {
  TensorNames n = kHuggingFaceNames;
  n.router = "mlp.router";
  n.expert_prefix = "mlp.experts.";
  n.expert_matrices = {"gate_up_proj", "", "down_proj"};
  n.fused_experts = true;
  n.sinks = "self_attn.sinks";
  return n;
}();

namespace {
// Gemma 4's text model with its tensors under `prefix` (string_views of literals: the names outlive
// every use).
const Gemma4Names kGemma4Extra{
    .ple_table = "model.language_model.embed_tokens_per_layer.weight",
    .ple_projection = "model.language_model.per_layer_model_projection.weight",
    .ple_norm = "model.language_model.per_layer_projection_norm.weight",
    .ple_gate = "per_layer_input_gate",
    .ple_layer_projection = "per_layer_projection",
    .ple_post_norm = "post_per_layer_input_norm",
    .layer_scalar = "layer_scalar",
    .router_scale = "router.scale",
    .expert_scale = "router.per_expert_scale",
    .expert_norm = "pre_feedforward_layernorm_2",
    .dense_out_norm = "post_feedforward_layernorm_1",
    .experts_out_norm = "post_feedforward_layernorm_2",
};
const Gemma4Names kGemma4TextExtra = [] {
  Gemma4Names n = kGemma4Extra;
  n.ple_table = "model.embed_tokens_per_layer.weight";
  n.ple_projection = "model.per_layer_model_projection.weight";
  n.ple_norm = "model.per_layer_projection_norm.weight";
  return n;
}();

TensorNames gemma4_names(std::string_view prefix, const Gemma4Names& extra) {
  TensorNames n = kGemmaNames;
  n.base_prefix = prefix;
  n.router = "router.proj";
  n.expert_prefix = "experts.";
  n.stacked_experts = {"gate_up_proj", "down_proj"};  // its only form
  n.gemma4 = &extra;
  return n;
}
constexpr TensorNames::Linear kDeltaNetNames{
    .qkvz = "linear_attn.in_proj_qkvz",
    .ba = "linear_attn.in_proj_ba",
    .qkv = "linear_attn.in_proj_qkv",
    .z = "linear_attn.in_proj_z",
    .b = "linear_attn.in_proj_b",
    .a = "linear_attn.in_proj_a",
    .conv = "linear_attn.conv1d",
    .dt_bias = "linear_attn.dt_bias",
    .a_log = "linear_attn.A_log",
    .norm = "linear_attn.norm",
    .out = "linear_attn.out_proj",
};
}  // namespace

const TensorNames kGemma4Names = [] {
  TensorNames n = gemma4_names("model.language_model.", kGemma4Extra);
  n.embed = "model.language_model.embed_tokens.weight";
  n.final_norm = "model.language_model.norm.weight";
  n.layer_prefix = "model.language_model.layers.";
  return n;
}();
const TensorNames kGemma4TextNames = gemma4_names("model.", kGemma4TextExtra);

const TensorNames kQwen3NextNames = [] {
  TensorNames n = kQwenMoeNames;
  n.linear = kDeltaNetNames;
  n.shared_expert = "mlp.shared_expert";
  n.shared_expert_gate = "mlp.shared_expert_gate";
  return n;
}();

const TensorNames kQwen35Names = [] {
  TensorNames n = kHuggingFaceNames;
  n.embed = "model.language_model.embed_tokens.weight";
  n.final_norm = "model.language_model.norm.weight";
  n.layer_prefix = "model.language_model.layers.";
  n.base_prefix = "model.language_model.";
  n.linear = kDeltaNetNames;
  return n;
}();

// Qwen3.5's mixture of experts (Qwen3.6-35B-A3B's model_type): Qwen3.5's layout with Qwen3-Next's
// router, experts and gated shared expert.
const TensorNames kQwen35MoeNames = [] {
  TensorNames n = kQwen35Names;
  n.router = kQwen3NextNames.router;
  n.expert_prefix = kQwen3NextNames.expert_prefix;
  n.expert_matrices = kQwen3NextNames.expert_matrices;
  n.shared_expert = kQwen3NextNames.shared_expert;
  n.shared_expert_gate = kQwen3NextNames.shared_expert_gate;
  n.stacked_experts = {"gate_up_proj", "down_proj"};
  return n;
}();

const TensorNames kGgufNames{
    .embed = "token_embd.weight",
    .lm_head = "output.weight",
    .final_norm = "output_norm.weight",
    .layer_prefix = "blk.",
    .attn_norm = "attn_norm",
    .mlp_norm = "ffn_norm",
    .q_norm = "attn_q_norm",
    .k_norm = "attn_k_norm",
    .post_attn_norm = "",
    .post_mlp_norm = "",
    .matrices = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"},
    .fused_qkv = "",
    .fused_gate_up = "",
    .router = "",
    .expert_prefix = "",
    .expert_matrices = {},
    .fused_experts = false,
    .sinks = "",
    .base_prefix = "",
    .gemma4 = nullptr,
};

std::string TensorNames::layer(int64_t index, std::string_view stem, std::string_view suffix) const {
  std::string s(layer_prefix);
  s += std::to_string(index);
  s += '.';
  s += stem;
  s += suffix;
  return s;
}

std::string TensorNames::expert(int64_t index, int64_t e, size_t which, std::string_view suffix) const {
  std::string stem(expert_prefix);
  stem += std::to_string(e);
  stem += '.';
  stem += expert_matrices[which];
  return layer(index, stem, suffix);
}

namespace {
const Architecture kArchitectures[] = {
    {.model_type = "llama", .names = &kHuggingFaceNames, .bias = BiasRule::kAttentionBias, .qk_norm = false,
     .window = WindowRule::kNone, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "mistral", .names = &kHuggingFaceNames, .bias = BiasRule::kNone, .qk_norm = false,
     .window = WindowRule::kAllLayers, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "qwen2", .names = &kHuggingFaceNames, .bias = BiasRule::kQkv, .qk_norm = false,
     .window = WindowRule::kFromMaxWindow, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "qwen3", .names = &kHuggingFaceNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kFromMaxWindow, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "gemma2", .names = &kGemmaNames, .bias = BiasRule::kAttentionBias, .qk_norm = false,
     .window = WindowRule::kGemma, .gemma_norms = true, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "gemma3_text", .names = &kGemmaNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kGemma, .gemma_norms = true, .local_rope = true, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "phi3", .names = &kPhi3Names, .bias = BiasRule::kNone, .qk_norm = false,
     .window = WindowRule::kAllLayers, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = true, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "smollm3", .names = &kHuggingFaceNames, .bias = BiasRule::kAttentionBias, .qk_norm = false,
     .window = WindowRule::kFromMaxWindow, .gemma_norms = false, .local_rope = false, .no_rope_layers = true,
     .partial_rotary = false, .moe = MoeRule::kNone,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "qwen3_moe", .names = &kQwenMoeNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kFromMaxWindow, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kQwen,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "mixtral", .names = &kMixtralNames, .bias = BiasRule::kNone, .qk_norm = false,
     .window = WindowRule::kAllLayers, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kMixtral,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "gpt_oss", .names = &kGptOssNames, .bias = BiasRule::kAttentionBias, .qk_norm = false,
     .window = WindowRule::kAlternating, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kGptOss,
     .layer_plan = false, .text_config = "", .tied_by_default = false},
    {.model_type = "gemma4", .names = &kGemma4Names, .bias = BiasRule::kNone, .qk_norm = true,
     .window = WindowRule::kGemma4, .gemma_norms = false, .local_rope = true, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kGemma4, .layer_plan = true, .text_config = "text_config",
     .tied_by_default = true},
    {.model_type = "gemma4_text", .names = &kGemma4TextNames, .bias = BiasRule::kNone, .qk_norm = true,
     .window = WindowRule::kGemma4, .gemma_norms = false, .local_rope = true, .no_rope_layers = false,
     .partial_rotary = false, .moe = MoeRule::kGemma4, .layer_plan = true, .text_config = "",
     .tied_by_default = true},
    {.model_type = "qwen3_next", .names = &kQwen3NextNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kNone, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = true, .moe = MoeRule::kQwen, .linear = LinearRule::kGroupedQkvz, .rotary_factor_default = 0.25,
     .head_dim_default = 256},
    {.model_type = "qwen3_5", .names = &kQwen35Names, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kNone, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = true, .moe = MoeRule::kNone, .linear = LinearRule::kSeparate, .rotary_factor_default = 0.25,
     .head_dim_default = 256, .text_config = "text_config"},
    {.model_type = "qwen3_5_moe", .names = &kQwen35MoeNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kNone, .gemma_norms = false, .local_rope = false, .no_rope_layers = false,
     .partial_rotary = true, .moe = MoeRule::kQwen, .linear = LinearRule::kSeparate, .rotary_factor_default = 0.25,
     .head_dim_default = 256, .text_config = "text_config"},
};
}  // namespace

const Architecture* find_architecture(std::string_view model_type) {
  for (const auto& a : kArchitectures)
    if (a.model_type == model_type) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto& a : kArchitectures) {
    if (!s.empty()) s += ", ";
    s += a.model_type;
  }
  return s;
}

}  // namespace ember::model
