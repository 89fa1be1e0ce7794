#include "model/gguf_architecture.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "model/gguf.h"

namespace ember::model {

namespace {

// `base` with the fields `edit` sets: each name set and row below says only how it differs.
template <class T>
constexpr T edited(T base, auto&& edit) {
  edit(base);
  return base;
}

// Gemma's four norms per layer: ffn_norm is Hugging Face's pre_feedforward_layernorm.
const TensorNames kGgufGemmaNames = edited(kGgufNames, [](TensorNames& n) {
  n.post_attn_norm = "post_attention_norm";
  n.post_mlp_norm = "post_ffw_norm";
});

// Gemma 4's pieces as llama.cpp names them. Its scalar tensors keep ".weight" (layer_output_scale),
// given here in the stem, which these stems take with no suffix.
const Gemma4Names kGgufGemma4Extra{
    .ple_table = "per_layer_token_embd.weight",
    .ple_projection = "per_layer_model_proj.weight",
    .ple_norm = "per_layer_proj_norm.weight",
    .ple_gate = "inp_gate",
    .ple_layer_projection = "proj",
    .ple_post_norm = "post_norm",
    .layer_scalar = "layer_output_scale.weight",
    .router_scale = "ffn_gate_inp.scale",
    .expert_scale = "ffn_down_exps.scale",
    .expert_norm = "pre_ffw_norm_2",
    .dense_out_norm = "post_ffw_norm_1",
    .experts_out_norm = "post_ffw_norm_2",
};

const TensorNames kGgufGemma4Names = edited(kGgufGemmaNames, [](TensorNames& n) { n.gemma4 = &kGgufGemma4Extra; });

// The router as stored, and each expert's slab of the stacked tensors under a name of its own
// (blk.L.expert.E.ffn_gate_exps.weight: expert E's slab).
const TensorNames kGgufMoeNames = edited(kGgufNames, [](TensorNames& n) {
  n.router = "ffn_gate_inp";
  n.expert_prefix = "expert.";
  n.expert_matrices = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
});

// The hybrids: the pre-MLP norm is post_attention_norm; attn_qkv rows [all q; all k; all v], attn_gate
// (z), ssm_beta / ssm_alpha (Qwen3-Next's ssm_ba is split into parts of these names), ssm_a (-exp(A_log),
// stored back as A_log under ssm_a_log at load), and the shared expert's ffn_*_shexp under
// shexp.<expert matrix> with the stored ffn_gate_inp_shexp as its gate.
const TensorNames kGgufHybridNames = edited(kGgufMoeNames, [](TensorNames& n) {
  n.mlp_norm = "post_attention_norm";
  n.linear = {.qkvz = "",
              .ba = "",
              .qkv = "attn_qkv",
              .z = "attn_gate",
              .b = "ssm_beta",
              .a = "ssm_alpha",
              .conv = "ssm_conv1d",
              .dt_bias = "ssm_dt.bias",
              .a_log = "ssm_a_log",
              .norm = "ssm_norm",
              .out = "ssm_out"};
  n.shared_expert = "shexp";
  n.shared_expert_gate = "ffn_gate_inp_shexp";
});

// gpt-oss: the pre-MLP norm is post_attention_norm, a sink logit per head in attn_sinks, and the
// experts' biases stacked as their matrices are (split into expert.E.<matrix>.bias).
const TensorNames kGgufGptOssNames = edited(kGgufMoeNames, [](TensorNames& n) {
  n.mlp_norm = "post_attention_norm";
  n.sinks = "attn_sinks.weight";
});

constexpr GgufArchitecture kPlain{.arch = "",
                                  .model_type = "",
                                  .moe_model_type = "",
                                  .names = &kGgufNames,
                                  .permuted_qk = false,
                                  .norms_stored_plus_one = false,
                                  .activation = Activation::kSilu,
                                  .windows = GgufWindows::kNone,
                                  .default_period = 0,
                                  .wide_query_scale_blocks = 0,
                                  .no_rope_interval = 0,
                                  .fused_qkv = "",
                                  .fused_gate_up = "",
                                  .stacked_experts = false,
                                  .expert_width_key = ""};

// Qwen3.5 (dense): value heads stored tiled.
constexpr GgufArchitecture kGgufQwen35 = edited(kPlain, [](GgufArchitecture& a) {
  a.arch = "qwen35";
  a.model_type = "qwen3_5";
  a.names = &kGgufHybridNames;
  a.norms_stored_plus_one = true;
  a.linear_layout = LinearRule::kSeparate;
  a.tiled_value_heads = true;
});

const GgufArchitecture kGgufArchitectures[] = {
    // Llama, Mistral (no window key: llama.cpp attends to every position) and Mixtral (expert_count > 0).
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "llama";
      a.moe_model_type = "mixtral";
      a.names = &kGgufMoeNames;
      a.permuted_qk = true;
      a.stacked_experts = true;
      a.expert_width_key = "feed_forward_length";
      a.writable = true;
      a.also_written_from = "mistral";
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "qwen2";
      a.writable = true;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "qwen3";
      a.writable = true;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = "qwen3moe";
      a.model_type = a.moe_model_type = "qwen3_moe";
      a.names = &kGgufMoeNames;
      a.stacked_experts = true;
      a.expert_width_key = "expert_feed_forward_length";
      a.writable = true;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "gemma2";
      a.names = &kGgufGemmaNames;
      a.norms_stored_plus_one = true;
      a.activation = Activation::kGeluTanh;
      a.windows = GgufWindows::kEvenLayers;
      a.wide_query_scale_blocks = 46;
      a.writable = true;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = "gemma3";
      a.model_type = "gemma3_text";
      a.names = &kGgufGemmaNames;
      a.norms_stored_plus_one = true;
      a.activation = Activation::kGeluTanh;
      a.windows = GgufWindows::kPattern;
      a.default_period = 6;
      a.wide_query_scale_blocks = 62;
      a.writable = true;
    }),
    // Gemma 4: the per-layer plan of model/gguf_layer_plan.h; norms stored as they multiply (no 1 + w);
    // every layer's window type from the pattern, which has no default. Its experts are refused
    // (moe_model_type ""): no shared file carries them yet.
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = "gemma4";
      a.model_type = "gemma4_text";
      a.names = &kGgufGemma4Names;
      a.activation = Activation::kGeluTanh;
      a.windows = GgufWindows::kPattern;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "phi3";
      a.windows = GgufWindows::kAllLayers;
      a.fused_qkv = "attn_qkv";
      a.fused_gate_up = "ffn_up";
      a.writable = true;
    }),
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = a.model_type = "smollm3";
      a.permuted_qk = true;
      a.no_rope_interval = 4;
      a.writable = true;
    }),
    // Qwen3-Next: every layer a mixture of experts with a shared expert; value heads in Hugging Face's order.
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = "qwen3next";
      a.model_type = a.moe_model_type = "qwen3_next";
      a.names = &kGgufHybridNames;
      a.norms_stored_plus_one = true;
      a.stacked_experts = true;
      a.expert_width_key = "expert_feed_forward_length";
      a.linear_layout = LinearRule::kSeparate;
      a.fused_ba = "ssm_ba";
    }),
    // gpt-oss: llama.cpp's arch gpt-oss (openai-moe); every even layer slides, q/k in Hugging Face's
    // row order (NEOX RoPE), experts stacked (MXFP4 kept as stored) with stacked biases.
    edited(kPlain, [](GgufArchitecture& a) {
      a.arch = "gpt-oss";
      a.model_type = a.moe_model_type = "gpt_oss";
      a.names = &kGgufGptOssNames;
      a.windows = GgufWindows::kEvenLayers;
      a.stacked_experts = true;
      a.expert_width_key = "expert_feed_forward_length";
    }),
    kGgufQwen35,
    // Qwen3.5's mixture of experts (Qwen3.6-35B-A3B): qwen35's layers with qwen3next's experts.
    edited(kGgufQwen35, [](GgufArchitecture& a) {
      a.arch = "qwen35moe";
      a.model_type = a.moe_model_type = "qwen3_5_moe";
      a.stacked_experts = true;
      a.expert_width_key = "expert_feed_forward_length";
    }),
};

}  // namespace

const GgufArchitecture* find_gguf_architecture(std::string_view arch) {
  for (const GgufArchitecture& a : kGgufArchitectures)
    if (a.arch == arch) return &a;
  return nullptr;
}

const GgufArchitecture& gguf_architecture(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  const GgufArchitecture* a = find_gguf_architecture(arch);
  if (a == nullptr)
    fail(g.path(), "metadata general.architecture is \"" + arch + "\" (supported: " + supported_gguf_architectures() + ")");
  return *a;
}

const GgufArchitecture* gguf_architecture_to_write(std::string_view model_type) {
  for (const GgufArchitecture& a : kGgufArchitectures)
    if (a.writable && (a.model_type == model_type || a.moe_model_type == model_type || a.also_written_from == model_type))
      return &a;
  return nullptr;
}

std::string writable_model_types() {
  std::vector<std::string_view> types;
  for (const GgufArchitecture& a : kGgufArchitectures)
    for (std::string_view t : {a.model_type, a.also_written_from, a.moe_model_type})
      if (a.writable && !t.empty() && std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  std::string s;
  for (std::string_view t : types) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

std::string supported_gguf_architectures() {
  std::string s;
  for (const GgufArchitecture& a : kGgufArchitectures) {
    if (!s.empty()) s += ", ";
    s += a.arch;
  }
  return s;
}

}  // namespace ember::model
