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
    .matrices = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj"},
};

const TensorNames kGgufNames{
    .embed = "token_embd.weight",
    .lm_head = "output.weight",
    .final_norm = "output_norm.weight",
    .layer_prefix = "blk.",
    .attn_norm = "attn_norm",
    .mlp_norm = "ffn_norm",
    .q_norm = "attn_q_norm",
    .k_norm = "attn_k_norm",
    .matrices = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"},
};

std::string TensorNames::layer(int64_t index, std::string_view stem, std::string_view suffix) const {
  std::string s(layer_prefix);
  s += std::to_string(index);
  s += '.';
  s += stem;
  s += suffix;
  return s;
}

namespace {
constexpr Architecture kArchitectures[] = {
    {.model_type = "llama", .names = &kHuggingFaceNames, .bias = BiasRule::kAttentionBias, .qk_norm = false,
     .window = WindowRule::kNone},
    {.model_type = "mistral", .names = &kHuggingFaceNames, .bias = BiasRule::kNone, .qk_norm = false,
     .window = WindowRule::kAllLayers},
    {.model_type = "qwen2", .names = &kHuggingFaceNames, .bias = BiasRule::kQkv, .qk_norm = false,
     .window = WindowRule::kFromMaxWindow},
    {.model_type = "qwen3", .names = &kHuggingFaceNames, .bias = BiasRule::kAttentionBias, .qk_norm = true,
     .window = WindowRule::kFromMaxWindow},
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
