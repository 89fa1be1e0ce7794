#pragma once
// The typed model configuration read from a Hugging Face config.json.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/architecture.h"

namespace ember::model {

enum class RopeScaling { None, Linear, Dynamic, Llama3 };

struct RopeConfig {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::None;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // Per-frequency divisors (head_dim/2 values; empty: none): a GGUF's rope_freqs.weight, which is how
  // llama.cpp stores Llama 3 scaling.
  std::vector<double> freq_divisors;
};

// What differs from one decoder layer to the next.
struct LayerSpec {
  int64_t sliding_window = 0;  // 0: full attention; else the last W positions
};

struct ModelConfig {
  std::string model_type;  // "llama", "mistral", "qwen2", "qwen3"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  // Resolved from the architecture table and config.json (model/architecture.h).
  bool qkv_bias = false;  // biases on the q, k and v projections
  bool o_bias = false;    // a bias on the attention output projection
  bool mlp_bias = false;  // biases on gate, up and down
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE
  std::vector<LayerSpec> layers;  // one per decoder layer (num_hidden_layers)
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  // [rows, cols] of a layer matrix (rows are output features), and whether it has a bias.
  std::array<int64_t, 2> shape(LayerMatrix m) const;
  bool has_bias(LayerMatrix m) const;
  // Whether any layer attends within a sliding window.
  bool any_sliding_window() const;
};

// Parses config.json text; `where` names the file in error messages. Throws ember::Error for a missing
// or mistyped field, an unknown model_type or an unsupported option, naming it and what is supported.
ModelConfig parse_config(const std::string& json_text, const std::string& where);

// Reads <dir>/config.json.
ModelConfig load_config(const std::string& model_dir);

// The inverse RoPE frequencies (head_dim/2 values) for a sequence whose length is `seq_len`
// (only the dynamic scaling depends on it), as Hugging Face's modeling_rope_utils computes them.
std::vector<double> rope_inv_freq(const ModelConfig& c, int64_t seq_len);

}  // namespace ember::model
