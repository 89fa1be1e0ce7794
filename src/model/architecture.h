#pragma once
// The table of supported architectures: what each model_type changes in the one shared forward pass.
#include <optional>
#include <string>
#include <string_view>

namespace ember::model {

struct Architecture {
  std::string_view model_type;
  bool qkv_bias_default;          // qwen2 always has q/k/v biases
  bool qk_norm;                   // qwen3
  bool sliding_window_supported;  // mistral (and qwen2 when use_sliding_window)
  bool sliding_window_needs_flag; // qwen2: only with use_sliding_window = true
};

const Architecture* find_architecture(std::string_view model_type);
std::string supported_architectures();  // "llama, mistral, qwen2, qwen3"

}  // namespace ember::model
