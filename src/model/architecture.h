#pragma once
// The table of supported architectures: what each model_type changes in the one shared forward pass,
// as named data. A new architecture is an entry here (and, for a new kind of layer, a field), never a
// branch in the forward pass or a copy of it.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::model {

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
  std::array<std::string_view, kLayerMatrices> matrices;  // stems, indexed by LayerMatrix

  std::string layer(int64_t index, std::string_view stem, std::string_view suffix = ".weight") const;
  std::string matrix(int64_t index, LayerMatrix m, std::string_view suffix = ".weight") const {
    return layer(index, matrices[static_cast<size_t>(m)], suffix);
  }
};

// Hugging Face's names (transformers' Llama, Mistral, Qwen2 and Qwen3 modules).
extern const TensorNames kHuggingFaceNames;
// llama.cpp's GGUF names (the same for its llama, qwen2 and qwen3 architectures).
extern const TensorNames kGgufNames;

// Which layers attend within a sliding window.
enum class WindowRule : uint8_t {
  kNone,           // every layer attends to the whole context
  kAllLayers,      // mistral: every layer uses `sliding_window` when it is set
  kFromMaxWindow,  // qwen2/qwen3: only with use_sliding_window, and only layers >= max_window_layers
};

// Which attention projections carry biases.
enum class BiasRule : uint8_t {
  kNone,           // mistral: never
  kQkv,            // qwen2: q, k and v always, o never
  kAttentionBias,  // llama, qwen3: q, k, v and o when config.json's attention_bias is true
};

struct Architecture {
  std::string_view model_type;
  const TensorNames* names;
  BiasRule bias;
  bool qk_norm;  // per-head RMSNorm of q and k before RoPE (qwen3)
  WindowRule window;
};

const Architecture* find_architecture(std::string_view model_type);
std::string supported_architectures();  // "llama, mistral, qwen2, qwen3"

}  // namespace ember::model
