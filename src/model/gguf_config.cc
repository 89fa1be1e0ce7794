#include "model/gguf_config.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "model/rope_config.h"

namespace ember::model {

bool is_gguf_path(const std::string& path) { return std::filesystem::path(path).extension() == ".gguf"; }

namespace {

constexpr const char* kGgufArchitectures = "llama, qwen2, qwen3";

// {arch}.<name> keys of one file, failing with the file and key named.
struct ArchKeys {
  const GgufFile& g;
  std::string arch;

  std::string key(const char* name) const { return arch + "." + name; }
  int64_t positive(const char* name) const {
    const int64_t v = g.get_int(key(name));
    if (v <= 0) fail(g.path(), "metadata " + key(name) + " must be positive (got " + std::to_string(v) + ")");
    return v;
  }
  int64_t positive_or(const char* name, int64_t dflt) const { return g.has(key(name)) ? positive(name) : dflt; }
};

// llama.cpp's YaRN (ggml's rope_yarn) is transformers' with truncate true (the ramp's ends floored
// and ceiled; GGUF has no key for it) and the attention scaling 0.1 ln(factor) + 1. The keys that
// change that scaling or the ramp are refused unless they leave it as it is.
void read_yarn(const ArchKeys& k, ModelConfig& c) {
  const GgufFile& g = k.g;
  const struct {
    const char* name;
    double neutral;
    const char* text;
  } unread[] = {{"rope.scaling.attn_factor", 1.0, "1"}, {"rope.scaling.yarn_attn_factor", 1.0, "1"},
                {"rope.scaling.yarn_ext_factor", 1.0, "1"}, {"rope.scaling.yarn_log_multiplier", 0.0, "0"}};
  for (const auto& u : unread)
    if (g.has(k.key(u.name)) && g.get_float(k.key(u.name)) != u.neutral)
      fail(g.path(), "metadata " + k.key(u.name) + " is supported only as " + u.text + " (the default YaRN scaling)");
  c.rope.original_max_position_embeddings = k.positive_or("rope.scaling.original_context_length", c.max_position_embeddings);
  c.rope.beta_fast = g.get_float_or(k.key("rope.scaling.yarn_beta_fast"), 32.0);
  c.rope.beta_slow = g.get_float_or(k.key("rope.scaling.yarn_beta_slow"), 1.0);
  if (!(c.rope.beta_fast > 0.0 && c.rope.beta_slow > 0.0))
    fail(g.path(), "metadata " + k.key("rope.scaling.yarn_beta_fast") + " and yarn_beta_slow must be positive");
  c.rope.truncate = true;
  c.rope.attention_factor = yarn_mscale(c.rope.factor);
}

void read_rope(const ArchKeys& k, ModelConfig& c) {
  const GgufFile& g = k.g;
  c.rope.theta = g.get_float_or(k.key("rope.freq_base"), 10000.0);
  if (const int64_t dims = k.positive_or("rope.dimension_count", c.head_dim); dims != c.head_dim)
    fail(g.path(), "metadata " + k.key("rope.dimension_count") + " is " + std::to_string(dims) +
                       " but the head dimension is " + std::to_string(c.head_dim) + " (partial rotary is not supported)");
  std::string type = g.get_string_or(k.key("rope.scaling.type"), "none");
  double factor = g.get_float_or(k.key("rope.scaling.factor"), 1.0);
  if (g.has(k.key("rope.scale_linear"))) {  // the older spelling of linear scaling
    type = "linear";
    factor = g.get_float(k.key("rope.scale_linear"));
  }
  if (type == "none" || (type == "linear" && factor == 1.0)) return;
  if (type != "linear" && type != "yarn")
    fail(g.path(), "metadata " + k.key("rope.scaling.type") + " is \"" + type + "\" (supported: none, linear, yarn)");
  if (!(factor > 0.0)) fail(g.path(), "metadata " + k.key("rope.scaling.factor") + " must be a positive number");
  c.rope.scaling = type == "yarn" ? RopeScaling::Yarn : RopeScaling::Linear;
  c.rope.factor = factor;
  if (type == "yarn") read_yarn(k, c);
}

// llama.cpp's Llama 3 RoPE: a tensor of head_dim/2 divisors of the inverse frequencies.
void read_freq_divisors(const GgufFile& g, ModelConfig& c) {
  const GgufTensor* t = g.find_tensor("rope_freqs.weight");
  if (t == nullptr) return;
  if (t->numel() != c.head_dim / 2 || !kernels::can_dequantize(t->type))
    fail(g.path(), "tensor rope_freqs.weight must hold " + std::to_string(c.head_dim / 2) + " float values");
  std::vector<float> f(static_cast<size_t>(t->numel()));
  kernels::dequantize_row(t->type, t->data, t->numel(), f.data());
  for (float v : f)
    if (!(v > 0.0f)) fail(g.path(), "tensor rope_freqs.weight holds a value that is not positive");
  c.rope.freq_divisors.assign(f.begin(), f.end());
}

}  // namespace

ModelConfig gguf_config(const GgufFile& g) {
  const std::string& where = g.path();
  ModelConfig c;
  c.model_type = g.get_string("general.architecture");
  // Only the architectures whose GGUF tensors and keys this reader maps (the table has more).
  const bool mapped = c.model_type == "llama" || c.model_type == "qwen2" || c.model_type == "qwen3";
  const Architecture* arch = mapped ? find_architecture(c.model_type) : nullptr;
  if (arch == nullptr)
    fail(where, "metadata general.architecture is \"" + c.model_type + "\" (supported: " + kGgufArchitectures + ")");
  const ArchKeys k{g, c.model_type};
  if (k.positive_or("expert_count", 0) > 0) fail(where, "metadata " + k.key("expert_count") + ": mixture-of-experts models are not supported");

  c.hidden_size = k.positive("embedding_length");
  c.intermediate_size = k.positive("feed_forward_length");
  c.num_hidden_layers = k.positive("block_count");
  c.num_attention_heads = k.positive("attention.head_count");
  c.num_key_value_heads = k.positive_or("attention.head_count_kv", c.num_attention_heads);
  c.head_dim = k.positive_or("attention.key_length", c.hidden_size / c.num_attention_heads);
  if (k.positive_or("attention.value_length", c.head_dim) != c.head_dim)
    fail(where, "metadata " + k.key("attention.value_length") + " differs from attention.key_length (not supported)");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) fail(where, "the head dimension must be a positive even number");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(where, "metadata " + k.key("attention.head_count") + " must be a multiple of attention.head_count_kv");
  c.max_position_embeddings = k.positive_or("context_length", 2048);
  check_dimensions(c, where);
  c.rms_norm_eps = g.get_float(k.key("attention.layer_norm_rms_epsilon"));
  read_rope(k, c);
  read_freq_divisors(g, c);

  const GgufKv* tokens = g.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::Array) fail(where, "metadata tokenizer.ggml.tokens: missing token list");
  c.vocab_size = static_cast<int64_t>(tokens->count);
  if (c.vocab_size == 0) fail(where, "metadata tokenizer.ggml.tokens is empty");
  check_dimensions(c, where);
  // llama.cpp writes no output.weight when the output projection is the embedding.
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;

  // Biases and q/k norms: the architecture's rule, and for llama / qwen3 whatever tensors the file has.
  const bool attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qkv_bias = arch->bias == BiasRule::kQkv || (arch->bias == BiasRule::kAttentionBias && attention_bias);
  c.o_bias = arch->bias == BiasRule::kAttentionBias && g.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = g.find_tensor("blk.0.ffn_up.bias") != nullptr;
  c.qk_norm = arch->qk_norm;
  c.layers.resize(static_cast<size_t>(c.num_hidden_layers));  // llama.cpp's GGUFs of these have no sliding window

  c.bos_token_id = static_cast<int32_t>(g.get_int_or("tokenizer.ggml.bos_token_id", -1));
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (g.has(key)) {
      const auto id = static_cast<int32_t>(g.get_int(key));
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) c.eos_token_ids.push_back(id);
    }
  return c;
}

}  // namespace ember::model
