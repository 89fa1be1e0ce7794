#pragma once
// The typed model configuration read from a Hugging Face config.json.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/architecture.h"

namespace ember::model {

// Proportional (Gemma 4's full layers): the first partial_rotary_factor * head_dim / 2 frequencies,
// with exponents over the whole head, divided by the factor; the rest are zero (left unrotated).
enum class RopeScaling { None, Linear, Dynamic, Llama3, Yarn, LongRope, Proportional };

struct RopeConfig {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::None;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and yarn: the pretrained context; longrope: the length past which long_factor applies
  int64_t original_max_position_embeddings = 0;
  // yarn only: the rotation counts bounding the ramp between extrapolated and interpolated
  // frequencies, and whether its ends are rounded to whole dims
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  // longrope only: per-frequency divisors (rope_dim/2 values each) for sequences up to
  // original_max_position_embeddings and past it
  std::vector<double> short_factor = {}, long_factor = {};
  // yarn and longrope: multiplies cos and sin (so the q.k logits by its square)
  double attention_factor = 1.0;
  // Per-frequency divisors (head_dim/2 values; empty: none): a GGUF's rope_freqs.weight, which is how
  // llama.cpp stores Llama 3 scaling.
  std::vector<double> freq_divisors = {};
  // proportional only
  double partial_rotary_factor = 1.0;
  // The head size these angles rotate, where layers differ (Gemma 4's sliding and full layers); 0:
  // the model's rope_dim().
  int64_t head_dim = 0;
};

// Which rotary angles a layer applies.
enum class LayerRope : uint8_t {
  kGlobal,  // ModelConfig::rope
  kLocal,   // ModelConfig::rope_local (Gemma 3's sliding layers)
  kNone,    // no rotation (SmolLM3's no_rope_layers)
};

// What mixes a layer's positions: softmax attention over the KV cache, or a hybrid's linear
// attention (Gated DeltaNet: a recurrent state per sequence, model/gated_deltanet.h).
enum class LayerKind : uint8_t { kAttention, kLinear };

// What differs from one decoder layer to the next.
struct LayerSpec {
  int64_t sliding_window = 0;  // 0: full attention; else the last W positions
  LayerRope rope = LayerRope::kGlobal;
  bool sparse_mlp = false;  // a mixture of experts instead of the dense MLP (or beside it: MoeConfig)
  // Gemma 4's per-layer attention shape where it differs from the model's (0: head_dim,
  // num_key_value_heads), read by ModelConfig::head_dim_of and kv_heads_of.
  int64_t head_dim = 0, kv_heads = 0;
  bool k_eq_v = false;     // no v_proj: the values are the raw keys (their own norm, no RoPE)
  int64_t kv_source = -1;  // >= 0: computes no keys or values and attends over that layer's
  int64_t mlp_width = 0;   // the dense MLP's width; 0: intermediate_size
  LayerKind kind = LayerKind::kAttention;
};

// A Gated DeltaNet layer's shape (config.json's linear_* keys): key_heads heads of key_dim for q and
// k, value_heads heads of value_dim for v, z and the state, a depthwise causal conv of conv_kernel.
struct LinearAttentionConfig {
  int64_t conv_kernel = 0;  // 0: no linear-attention layers
  int64_t key_heads = 0, key_dim = 0, value_heads = 0, value_dim = 0;
  // How the projections are stored where a file differs from its architecture's LinearRule (a GGUF
  // file: model/gguf_architecture.h); kNone: the architecture's.
  LinearRule layout = LinearRule::kNone;
  // Value head h reads key head h % key_heads (llama.cpp's qwen35 files store the value heads tiled)
  // instead of Hugging Face's h / (value_heads / key_heads).
  bool tiled_value_heads = false;
  int64_t key_head_of(int64_t value_head) const {
    return tiled_value_heads ? value_head % key_heads : value_head / (value_heads / key_heads);
  }
  int64_t key_width() const { return key_heads * key_dim; }
  int64_t value_width() const { return value_heads * value_dim; }
  int64_t conv_channels() const { return 2 * key_width() + value_width(); }  // [q; k; v]
};

enum class Activation : uint8_t { kSilu, kGeluTanh };  // of the gate, times up

// A mixture-of-experts MLP: a router over num_experts SwiGLU experts of width intermediate_size,
// the top experts_per_tok of a token's softmax chosen (ties to the lower index).
struct MoeConfig {
  int64_t num_experts = 0;  // 0: no experts
  int64_t experts_per_tok = 0;
  int64_t intermediate_size = 0;
  bool renormalize = false;  // divide the chosen weights by their sum
  // gpt-oss: the router and each expert's gate/up and down carry biases, and its SwiGLU is clamped:
  // gate = min(gate, limit), up = clamp(up, -limit, limit), out = (up + 1) * gate * sigmoid(1.702 gate).
  bool biases = false;
  double swiglu_limit = 0;  // 0: the plain SwiGLU
  // gpt-oss's published checkpoints: the experts stored as MXFP4 *_blocks / *_scales (U8), kept so in
  // memory (quantization_config.quant_method "mxfp4").
  bool mxfp4 = false;
  // Gemma 4: the experts run beside the dense MLP (each output normed before their sum), route on
  // the weightless norm of the residual times router.scale, and each weight is scaled per expert.
  bool beside_dense = false;
  // Qwen3-Next: a shared SwiGLU expert of this width added to every token, times sigmoid(h . gate); 0: none.
  int64_t shared_intermediate_size = 0;
};

struct ModelConfig {
  std::string model_type;  // a model_type of the architecture table (model/architecture.h)
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
  bool norm_plus_one = false;  // RMSNorm scales by (1 + weight) (Gemma)
  bool post_norms = false;     // the attention and MLP outputs are normed before their residual adds
  double embed_scale = 1.0;    // embeddings are multiplied by this (Gemma: sqrt(hidden_size))
  Activation activation = Activation::kSilu;
  double query_pre_attn_scalar = 0;  // attention scores scale by its -0.5 power; 0: head_dim
  double attn_softcap = 0;           // scores become tanh(s / c) * c before the mask; 0: none
  double final_softcap = 0;          // the same on the final logits
  int64_t rotary_dim = 0;            // leading dims of each head that RoPE rotates; 0: head_dim
  RopeConfig rope_local;             // for LayerRope::kLocal layers
  bool fused_qkv = false, fused_gate_up = false;  // stored fused, split at load (Phi-3)
  bool attention_sinks = false;  // a learned sink logit per query head (gpt-oss)
  // q_proj yields per head [query | gate]; the attention output is multiplied by sigmoid(gate) (Qwen3-Next, Qwen3.5).
  bool attn_output_gate = false;
  LinearAttentionConfig linear;  // the LayerKind::kLinear layers' shape
  MoeConfig moe;
  // Gemma 4: values get a weightless RMSNorm per head; each layer ends scaling the residual by its
  // layer_scalar; per-layer embeddings of this width (0: none) from a table of per_layer_vocab rows.
  bool value_norm = false;
  bool layer_scalar = false;
  int64_t per_layer_input = 0;
  int64_t per_layer_vocab = 0;
  std::vector<LayerSpec> layers;  // one per decoder layer (num_hidden_layers)
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  // The same per layer, where LayerSpec sets its own shape (Gemma 4), and the largest over layers.
  // (A config without layers, as a test's, has the model's shape on every layer.)
  int64_t head_dim_of(size_t layer) const {
    return layer < layers.size() && layers[layer].head_dim > 0 ? layers[layer].head_dim : head_dim;
  }
  int64_t kv_heads_of(size_t layer) const {
    return layer < layers.size() && layers[layer].kv_heads > 0 ? layers[layer].kv_heads : num_key_value_heads;
  }
  // The layer whose keys and values `layer` attends over: its own, or LayerSpec::kv_source's.
  int64_t kv_layer_of(size_t layer) const {
    return layer < layers.size() && layers[layer].kv_source >= 0 ? layers[layer].kv_source : static_cast<int64_t>(layer);
  }
  // Whether `layer` stores keys and values: an attention layer that reads no other layer's.
  bool stores_kv(size_t layer) const {
    return (layer >= layers.size() || layers[layer].kind == LayerKind::kAttention) &&
           kv_layer_of(layer) == static_cast<int64_t>(layer);
  }
  int64_t q_dim_of(size_t layer) const { return num_attention_heads * head_dim_of(layer); }
  int64_t kv_dim_of(size_t layer) const { return kv_heads_of(layer) * head_dim_of(layer); }
  int64_t mlp_width_of(size_t layer) const {
    return layer < layers.size() && layers[layer].mlp_width > 0 ? layers[layer].mlp_width : intermediate_size;
  }
  int64_t max_q_dim() const;
  int64_t max_kv_dim() const;
  int64_t max_mlp_width() const;
  // [rows, cols] of a layer matrix (rows are output features), and whether it has a bias.
  std::array<int64_t, 2> shape(LayerMatrix m) const;
  std::array<int64_t, 2> shape(LayerMatrix m, size_t layer) const;  // of that layer (LayerSpec's shape)
  bool has_bias(LayerMatrix m) const;
  // Whether any layer attends within a sliding window.
  bool any_sliding_window() const;
  bool rope_local_used() const {
    for (const LayerSpec& l : layers)
      if (l.rope == LayerRope::kLocal) return true;
    return false;
  }
  int64_t rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Layers of LayerKind::kAttention: those that hold KV blocks.
  int64_t attention_layers() const;
  float attention_scale() const;
};

// Parses config.json text; `where` names the file in error messages. Throws ember::Error for a missing
// or mistyped field, an unknown model_type or an unsupported option, naming it and what is supported.
ModelConfig parse_config(const std::string& json_text, const std::string& where);

// Fails, naming `where`, when a dimension read from a file is beyond what Ember can size safely
// (every parser calls it before allocating by them).
void check_dimensions(const ModelConfig& c, const std::string& where);

// Fails, naming `where` and the source's own name of the field (a config.json field, a GGUF key),
// when the norm epsilon is negative or the RoPE base is not positive (or either is NaN): such a model
// loaded, then every logit came out NaN.
struct NumberFieldNames {
  std::string rms_norm_eps, rope_theta;
};
void check_numbers(const ModelConfig& c, const std::string& where, const NumberFieldNames& names);

// Reads <dir>/config.json.
ModelConfig load_config(const std::string& model_dir);

// The inverse RoPE frequencies (rope_dim()/2 values) for a sequence whose length is `seq_len`
// (only dynamic and longrope scaling depend on it), as Hugging Face's modeling_rope_utils computes
// them (model/rope_config.cc).
std::vector<double> rope_inv_freq(const ModelConfig& c, int64_t seq_len);
// The same for one of the model's rope configs (c.rope or c.rope_local).
std::vector<double> rope_inv_freq(const ModelConfig& c, const RopeConfig& rope, int64_t seq_len);

}  // namespace ember::model
