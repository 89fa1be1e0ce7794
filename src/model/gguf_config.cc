#include "model/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "model/gguf_architecture.h"
#include "model/gguf_keys.h"
#include "model/gguf_layer_plan.h"
#include "model/rope_config.h"

namespace ember::model {

bool is_gguf_path(const std::string& path) { return std::filesystem::path(path).extension() == ".gguf"; }

namespace {

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

void read_rope(const ArchKeys& k, const Architecture& arch, ModelConfig& c) {
  const GgufFile& g = k.g;
  c.rope.theta = g.get_float_or(k.key("rope.freq_base"), 10000.0);
  const int64_t dims = k.positive_or("rope.dimension_count", c.head_dim);
  if (arch.partial_rotary) {  // RoPE on the leading dims of each head, the rest untouched
    if (dims > c.head_dim || dims % 2 != 0)
      fail(g.path(), "metadata " + k.key("rope.dimension_count") + " is " + std::to_string(dims) +
                         " (it must be even and at most the head dimension " + std::to_string(c.head_dim) + ")");
    c.rotary_dim = dims;
  } else if (dims != c.head_dim) {
    fail(g.path(), "metadata " + k.key("rope.dimension_count") + " is " + std::to_string(dims) + " but the head dimension is " +
                       std::to_string(c.head_dim) + " (partial rotary is not supported for arch " + k.arch + ")");
  }
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

// The values of a float tensor of `count` elements, each positive; nullopt when the file lacks it.
std::optional<std::vector<double>> positive_values(const GgufFile& g, const char* name, int64_t count) {
  const GgufTensor* t = g.find_tensor(name);
  if (t == nullptr) return std::nullopt;
  if (t->numel() != count || !kernels::can_dequantize(t->type))
    fail(g.path(), std::string("tensor ") + name + " must hold " + std::to_string(count) + " float values");
  std::vector<float> f(static_cast<size_t>(count));
  kernels::dequantize_row(t->type, t->data, count, f.data());
  for (float v : f)
    if (!(v > 0.0f)) fail(g.path(), std::string("tensor ") + name + " holds a value that is not positive");
  return std::vector<double>(f.begin(), f.end());
}

// llama.cpp's Llama 3 RoPE: a tensor of head_dim/2 divisors of the inverse frequencies.
void read_freq_divisors(const GgufFile& g, ModelConfig& c) {
  if (auto f = positive_values(g, "rope_freqs.weight", c.head_dim / 2)) c.rope.freq_divisors = std::move(*f);
}

// Phi-3's long-rope as convert_hf_to_gguf writes it: rope_factors_short / _long tensors (rotary dims / 2
// divisors each), the pretrained context in rope.scaling.original_context_length and the cos/sin
// scaling in rope.scaling.attn_factor. Applied as transformers applies them (the factors by the
// sequence's length; llama.cpp picks them by the context size it runs with).
void read_long_rope(const ArchKeys& k, ModelConfig& c) {
  const GgufFile& g = k.g;
  const int64_t n = c.rope_dim() / 2;
  auto short_f = positive_values(g, "rope_factors_short.weight", n), long_f = positive_values(g, "rope_factors_long.weight", n);
  if (!short_f && !long_f) return;
  if (!short_f || !long_f)
    fail(g.path(), std::string("tensor ") + (short_f ? "rope_factors_long.weight" : "rope_factors_short.weight") +
                       " is missing (long-rope needs both factor tensors)");
  if (c.rope.scaling != RopeScaling::None)
    fail(g.path(), "metadata " + k.key("rope.scaling.type") + " and the rope_factors tensors both scale RoPE");
  RopeConfig& r = c.rope;
  r.scaling = RopeScaling::LongRope;
  r.short_factor = std::move(*short_f);
  r.long_factor = std::move(*long_f);
  r.original_max_position_embeddings = k.positive("rope.scaling.original_context_length");
  r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
  const double ctx = static_cast<double>(r.original_max_position_embeddings);
  r.attention_factor = g.get_float_or(k.key("rope.scaling.attn_factor"),
                                      r.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(r.factor) / std::log(ctx)));
  if (!(r.attention_factor > 0)) fail(g.path(), "metadata " + k.key("rope.scaling.attn_factor") + " must be positive");
}

// Each layer's window (GgufArchitecture::windows) and, for local RoPE, its rotation.
void read_windows(const ArchKeys& k, const GgufArchitecture& ga, const Architecture& arch, ModelConfig& c) {
  const GgufFile& g = k.g;
  c.layers.assign(static_cast<size_t>(c.num_hidden_layers), LayerSpec{});
  const std::string window_key = k.key("attention.sliding_window"), pattern_key = k.key("attention.sliding_window_pattern");
  // llama.cpp attends to every position for these archs whatever window key a converter wrote
  // (a Mistral file's 4096): the file means what llama.cpp runs.
  if (ga.windows == GgufWindows::kNone) return;
  const int64_t window = g.get_int_or(window_key, 0);
  if (window < 0) fail(g.path(), "metadata " + window_key + " must not be negative");
  if (ga.windows != GgufWindows::kPattern && g.has(pattern_key))
    fail(g.path(), "metadata " + pattern_key + " is not supported for arch " + k.arch);
  std::vector<bool> sliding(c.layers.size(), ga.windows == GgufWindows::kAllLayers);
  if (ga.windows == GgufWindows::kEvenLayers)
    for (size_t l = 0; l < sliding.size(); ++l) sliding[l] = l % 2 == 0;
  if (ga.windows == GgufWindows::kPattern) {
    int64_t period = ga.default_period;
    const GgufKv* kv = g.find(pattern_key);
    // (llama.cpp reads gemma4's as one value per layer, a scalar for every layer: no period form.)
    if (period == 0 && (kv == nullptr || kv->type != GgufValueType::Array))
      fail(g.path(), "metadata " + pattern_key + (kv == nullptr ? " is missing" : " must be an array of one bool per layer") +
                         " (arch " + k.arch + " has no default pattern and no period)");
    if (kv != nullptr && kv->type == GgufValueType::Array) {
      const nlohmann::json flags = g.get_json(pattern_key);  // one bool per layer, true: sliding
      if (flags.size() != sliding.size())
        fail(g.path(), "metadata " + pattern_key + " has " + std::to_string(flags.size()) + " entries for " +
                           std::to_string(sliding.size()) + " layers");
      for (size_t l = 0; l < sliding.size(); ++l) {
        if (!flags[l].is_boolean()) fail(g.path(), "metadata " + pattern_key + " must be an array of bools or a period");
        sliding[l] = flags[l].get<bool>();
      }
      period = 0;
    } else if (kv != nullptr) {
      period = g.get_int(pattern_key);
      if (period <= 0) fail(g.path(), "metadata " + pattern_key + " must be a positive period (got " + std::to_string(period) + ")");
    }
    if (period > 0)
      for (size_t l = 0; l < sliding.size(); ++l) sliding[l] = (static_cast<int64_t>(l) + 1) % period != 0;
  }
  if (window == 0) return;  // phi3's 0: no window
  for (size_t l = 0; l < sliding.size(); ++l)
    if (sliding[l]) {
      c.layers[l].sliding_window = window;
      if (arch.local_rope) c.layers[l].rope = LayerRope::kLocal;
    }
  if (arch.local_rope) {  // sliding layers: their own base, never scaled
    c.rope_local.theta = g.get_float_or(k.key("rope.freq_base_swa"), 10000.0);
    if (!(c.rope_local.theta > 0)) fail(g.path(), "metadata " + k.key("rope.freq_base_swa") + " must be positive");
  }
}

// Gemma's scaling, query scale and soft-capping, as llama.cpp reads them; SmolLM3's no-RoPE layers.
void read_family_options(const ArchKeys& k, const GgufArchitecture& ga, const Architecture& arch, ModelConfig& c) {
  const GgufFile& g = k.g;
  c.activation = ga.activation;
  c.norm_plus_one = arch.gemma_norms && !ga.norms_stored_plus_one;
  c.post_norms = !ga.names->post_attn_norm.empty();
  if (arch.gemma_norms) {
    c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
    const bool wide = c.num_hidden_layers == ga.wide_query_scale_blocks;
    c.query_pre_attn_scalar = static_cast<double>(wide ? c.hidden_size / c.num_attention_heads : c.head_dim);
  }
  // Gemma 2 / 3 cap scores and logits; Gemma 4 (arch.layer_plan) the logits alone.
  const struct {
    const char* name;
    double* cap;
    bool supported;
  } softcaps[] = {{"attn_logit_softcapping", &c.attn_softcap, arch.gemma_norms},
                  {"final_logit_softcapping", &c.final_softcap, arch.gemma_norms || arch.layer_plan}};
  for (const auto& s : softcaps) {
    if (!s.supported) {
      if (g.has(k.key(s.name))) fail(g.path(), "metadata " + k.key(s.name) + " is not supported for arch " + k.arch);
      continue;
    }
    *s.cap = g.get_float_or(k.key(s.name), 0.0);
    if (!(*s.cap >= 0) || !std::isfinite(*s.cap)) fail(g.path(), "metadata " + k.key(s.name) + " must be a positive number");
  }
  if (ga.no_rope_interval > 0)
    for (size_t l = 0; l < c.layers.size(); ++l)
      if ((static_cast<int64_t>(l) + 1) % ga.no_rope_interval == 0) c.layers[l].rope = LayerRope::kNone;
}

// Experts: every layer sparse, the top expert_used_count of the softmax renormalised (llama.cpp
// always renormalises; no key carries norm_topk_prob).
void read_experts(const ArchKeys& k, const GgufArchitecture& ga, const Architecture& arch, int64_t experts, ModelConfig& c) {
  if (experts == 0) return;
  MoeConfig& m = c.moe;
  m.num_experts = experts;
  m.experts_per_tok = k.positive("expert_used_count");
  if (m.experts_per_tok > experts)
    fail(k.g.path(), "metadata " + k.key("expert_used_count") + " is " + std::to_string(m.experts_per_tok) + ", more than " +
                         k.key("expert_count") + " " + std::to_string(experts));
  m.intermediate_size = k.positive(std::string(ga.expert_width_key).c_str());
  m.renormalize = true;
  if (arch.moe == MoeRule::kGptOss) {  // biases on the router and experts; llama.cpp's fixed clamp (no key)
    m.biases = true;
    m.swiglu_limit = 7.0;
  }
  for (LayerSpec& l : c.layers) l.sparse_mlp = true;
}

// The keys only the hybrids have; an arch without linear-attention layers refuses them.
constexpr const char* kHybridKeys[] = {"ssm.conv_kernel",        "ssm.state_size",          "ssm.group_count",
                                       "ssm.time_step_rank",     "ssm.inner_size",          "attention.recurrent_layers",
                                       "full_attention_interval", "rope.dimension_sections",
                                       "expert_shared_feed_forward_length"};

// Which layers are Gated DeltaNet: attention.recurrent_layers (one bool per layer, true: linear), else
// every full_attention_interval-th layer attends (llama.cpp's default 4); both present must agree.
void read_layer_kinds(const ArchKeys& k, ModelConfig& c) {
  const GgufFile& g = k.g;
  const std::string flags_key = k.key("attention.recurrent_layers"), interval_key = k.key("full_attention_interval");
  const int64_t interval = k.positive_or("full_attention_interval", 4);
  for (size_t l = 0; l < c.layers.size(); ++l)
    if ((static_cast<int64_t>(l) + 1) % interval != 0) c.layers[l].kind = LayerKind::kLinear;
  if (!g.has(flags_key)) return;
  const GgufKv* kv = g.find(flags_key);
  const nlohmann::json flags = g.get_json(flags_key);
  const size_t blocks = c.layers.size() + static_cast<size_t>(k.trailing_blocks);
  if (kv->type != GgufValueType::Array || (flags.size() != c.layers.size() && flags.size() != blocks))
    fail(g.path(), "metadata " + flags_key + " must be an array of one bool per layer (" + std::to_string(c.layers.size()) + ")");
  for (size_t l = 0; l < c.layers.size(); ++l) {
    if (!flags[l].is_boolean()) fail(g.path(), "metadata " + flags_key + " must be an array of bools");
    const LayerKind kind = flags[l].get<bool>() ? LayerKind::kLinear : LayerKind::kAttention;
    if (g.has(interval_key) && kind != c.layers[l].kind)
      fail(g.path(), "metadata " + interval_key + " (" + std::to_string(interval) + ") disagrees with " + flags_key +
                         " at layer " + std::to_string(l));
    c.layers[l].kind = kind;
  }
}

// The Gated DeltaNet layers' shape from the ssm.* keys (conv_kernel K, state_size the key head dim,
// group_count the key heads, time_step_rank the value heads, inner_size their total width), the
// gated attention, the norms as stored, and the shared expert's width.
void read_hybrid(const ArchKeys& k, const GgufArchitecture& ga, const Architecture& arch, ModelConfig& c) {
  const GgufFile& g = k.g;
  if (ga.linear_layout == LinearRule::kNone || arch.linear == LinearRule::kNone) {
    for (const char* name : kHybridKeys)
      if (g.has(k.key(name))) fail(g.path(), "metadata " + k.key(name) + " is not supported for arch " + k.arch);
    return;
  }
  read_layer_kinds(k, c);
  LinearAttentionConfig& a = c.linear;
  a.conv_kernel = k.positive("ssm.conv_kernel");
  a.key_dim = k.positive("ssm.state_size");
  a.key_heads = k.positive("ssm.group_count");
  a.value_heads = k.positive("ssm.time_step_rank");
  const int64_t inner = k.positive("ssm.inner_size");
  if (a.value_heads % a.key_heads != 0)
    fail(g.path(), "metadata " + k.key("ssm.time_step_rank") + " (value heads) must be a multiple of " + k.key("ssm.group_count"));
  if (inner % a.value_heads != 0)
    fail(g.path(), "metadata " + k.key("ssm.inner_size") + " must be a multiple of " + k.key("ssm.time_step_rank"));
  a.value_dim = inner / a.value_heads;
  a.layout = ga.linear_layout;
  a.tiled_value_heads = ga.tiled_value_heads;
  c.attn_output_gate = true;
  c.norm_plus_one = !ga.norms_stored_plus_one;
  // M-RoPE's sections: text positions give every section the same angle, so plain RoPE; checked for shape.
  if (const std::string key = k.key("rope.dimension_sections"); g.has(key)) {
    const nlohmann::json s = g.get_json(key);
    if (!s.is_array() || std::any_of(s.begin(), s.end(), [](const nlohmann::json& v) { return !v.is_number_integer() || v.get<int64_t>() < 0; }))
      fail(g.path(), "metadata " + key + " must be an array of non-negative integers");
  }
  if (!ga.names->shared_expert.empty() && c.moe.num_experts > 0)
    c.moe.shared_intermediate_size = k.positive("expert_shared_feed_forward_length");
  else if (g.has(k.key("expert_shared_feed_forward_length")))
    fail(g.path(), "metadata " + k.key("expert_shared_feed_forward_length") + " is not supported for arch " + k.arch);
}

// The model_type the file runs as: its row's, or the row's mixture-of-experts model_type when the
// file has experts; refused when the two disagree.
const Architecture& resolve_model_type(const ArchKeys& k, const GgufArchitecture& ga, int64_t experts, ModelConfig& c) {
  const std::string count_key = k.key("expert_count");
  if (experts > 0 && ga.moe_model_type.empty())
    fail(k.g.path(), "metadata " + count_key + ": arch " + k.arch + " has no mixture-of-experts form in Ember");
  c.model_type = std::string(experts > 0 ? ga.moe_model_type : ga.model_type);
  const Architecture* arch = find_architecture(c.model_type);
  if (arch == nullptr) fail(k.g.path(), "GGUF arch " + k.arch + " names model_type " + c.model_type + ", which the table lacks");
  // (Gemma 4's experts are optional: its dense models have none.)
  if (arch->moe != MoeRule::kNone && arch->moe != MoeRule::kGemma4 && experts == 0)
    fail(k.g.path(), "metadata " + count_key + " is missing or 0, but arch " + k.arch + " is a mixture of experts");
  return *arch;
}

}  // namespace

ModelConfig gguf_config(const GgufFile& g) {
  const std::string& where = g.path();
  const GgufArchitecture& ga = gguf_architecture(g);
  ModelConfig c;
  // llama.cpp writes a model's multi-token-prediction blocks (Qwen3-Next, Qwen3.5) after its decoder
  // layers and counts them in block_count; Ember does not draft with them, so they are not layers.
  const std::string nextn_key = std::string(ga.arch) + ".nextn_predict_layers";
  const int64_t nextn = g.get_int_or(nextn_key, 0);
  const ArchKeys k{g, std::string(ga.arch), nextn};
  const int64_t experts = g.get_int_or(k.key("expert_count"), 0);
  if (experts < 0) fail(where, "metadata " + k.key("expert_count") + " must not be negative");
  const Architecture* arch = &resolve_model_type(k, ga, experts, c);

  c.hidden_size = k.positive("embedding_length");
  c.num_hidden_layers = k.positive("block_count");
  if (nextn < 0 || nextn >= c.num_hidden_layers)
    fail(where, "metadata " + nextn_key + " is " + std::to_string(nextn) + ", not between 0 and " + k.key("block_count") +
                    " (" + std::to_string(c.num_hidden_layers) + ")");
  c.num_hidden_layers -= nextn;
  check_dimensions(c, where);  // before anything is sized by the layer count
  c.num_attention_heads = k.positive("attention.head_count");
  // llama.cpp's arrays of one value per layer (Gemma 4's); read_gguf_layer_plan gives each layer its own.
  for (const char* name : {"feed_forward_length", "attention.head_count_kv"})
    if (k.is_array(name) && !arch->layer_plan)
      fail(where, "metadata " + k.key(name) + " is an array per layer, which arch " + k.arch + " does not have");
  c.intermediate_size = k.per_layer("feed_forward_length", c.num_hidden_layers)[0];
  c.num_key_value_heads = k.per_layer_or("attention.head_count_kv", c.num_hidden_layers, c.num_attention_heads)[0];
  c.head_dim = k.positive_or("attention.key_length", c.hidden_size / c.num_attention_heads);
  if (k.positive_or("attention.value_length", c.head_dim) != c.head_dim)
    fail(where, "metadata " + k.key("attention.value_length") + " differs from attention.key_length (not supported)");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) fail(where, "the head dimension must be a positive even number");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(where, "metadata " + k.key("attention.head_count") + " must be a multiple of attention.head_count_kv");
  c.max_position_embeddings = k.positive_or("context_length", 2048);
  check_dimensions(c, where);
  c.rms_norm_eps = g.get_float(k.key("attention.layer_norm_rms_epsilon"));
  read_rope(k, *arch, c);
  check_numbers(c, where, {"metadata " + k.key("attention.layer_norm_rms_epsilon"), "metadata " + k.key("rope.freq_base")});
  read_freq_divisors(g, c);
  read_long_rope(k, c);

  const GgufKv* tokens = g.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::Array) fail(where, "metadata tokenizer.ggml.tokens: missing token list");
  c.vocab_size = static_cast<int64_t>(tokens->count);
  if (c.vocab_size == 0) fail(where, "metadata tokenizer.ggml.tokens is empty");
  check_dimensions(c, where);
  // llama.cpp writes no output.weight when the output projection is the embedding.
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;

  // Biases: the architecture's rule, and where it allows them (BiasRule::kAttentionBias) the file's tensors
  // say (no key does: llama.cpp loads them when present).
  const bool attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qkv_bias = arch->bias == BiasRule::kQkv || (arch->bias == BiasRule::kAttentionBias && attention_bias);
  c.o_bias = arch->bias == BiasRule::kAttentionBias && g.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = g.find_tensor("blk.0.ffn_up.bias") != nullptr;
  c.qk_norm = arch->qk_norm;
  c.attention_sinks = !ga.names->sinks.empty();
  read_windows(k, ga, *arch, c);
  read_family_options(k, ga, *arch, c);
  read_experts(k, ga, *arch, experts, c);
  if (arch->layer_plan) read_gguf_layer_plan(k, ga, c);
  read_hybrid(k, ga, *arch, c);
  check_dimensions(c, where);

  c.bos_token_id = static_cast<int32_t>(g.get_int_or("tokenizer.ggml.bos_token_id", -1));
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (g.has(key)) {
      const auto id = static_cast<int32_t>(g.get_int(key));
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) c.eos_token_ids.push_back(id);
    }
  return c;
}

}  // namespace ember::model
