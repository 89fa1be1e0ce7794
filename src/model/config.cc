#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/format.h"
#include "base/mapped_file.h"
#include "model/architecture.h"
#include "model/config_fields.h"
#include "model/layer_plan.h"
#include "model/rope_config.h"
#include "tokenizer/tokenizer.h"

namespace ember::model {

namespace {

using nlohmann::json;

using Reader = ConfigFields;

// Each layer's attention window: config.json's layer_types where given, else the architecture's rule.
std::vector<LayerSpec> parse_layers(const Reader& r, const Architecture& arch, int64_t n_layers) {
  std::vector<LayerSpec> layers(static_cast<size_t>(n_layers));
  if (arch.window == WindowRule::kNone) return layers;
  const bool on = arch.window == WindowRule::kAllLayers || arch.window == WindowRule::kGemma ||
                  arch.window == WindowRule::kAlternating || arch.window == WindowRule::kGemma4 ||
                  r.boolean_or("use_sliding_window", false);
  const int64_t window = on ? r.integer_or("sliding_window", arch.window == WindowRule::kGemma4 ? 512 : 0) : 0;
  if (window == 0) return layers;
  if (const json* types = r.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != n_layers)
      fail(r.where, "field \"layer_types\" must be an array of num_hidden_layers strings");
    for (size_t l = 0; l < layers.size(); ++l) {
      const json& t = (*types)[l];
      if (t == "sliding_attention") layers[l].sliding_window = window;
      else if (t != "full_attention")
        fail(r.where, "layer_types[" + std::to_string(l) + "] is " + t.dump() +
                          " (supported: \"full_attention\", \"sliding_attention\")");
    }
    return layers;
  }
  if (arch.window == WindowRule::kGemma) {
    // transformers' Gemma 3: every sliding_window_pattern-th layer is full; Gemma 2: the odd layers are.
    const int64_t pattern = r.integer_or("sliding_window_pattern", 2);
    if (pattern == 0) fail(r.where, "field \"sliding_window_pattern\" must be positive");
    const bool gemma2 = r.find("sliding_window_pattern") == nullptr;
    for (int64_t l = 0; l < n_layers; ++l)
      if (gemma2 ? l % 2 == 0 : (l + 1) % pattern != 0) layers[static_cast<size_t>(l)].sliding_window = window;
    return layers;
  }
  if (arch.window == WindowRule::kGemma4) {
    // transformers' Gemma4TextConfig: every 6th layer full, and the last layer always.
    for (int64_t l = 0; l + 1 < n_layers; ++l)
      if ((l + 1) % 6 != 0) layers[static_cast<size_t>(l)].sliding_window = window;
    return layers;
  }
  if (arch.window == WindowRule::kAlternating) {
    for (size_t l = 0; l < layers.size(); l += 2) layers[l].sliding_window = window;
    return layers;
  }
  // transformers' Qwen2/Qwen3: the window applies from layer max_window_layers on.
  const int64_t first = arch.window == WindowRule::kFromMaxWindow ? r.integer_or("max_window_layers", 28) : 0;  // transformers' default
  for (int64_t l = first; l < n_layers; ++l) layers[static_cast<size_t>(l)].sliding_window = window;
  return layers;
}

Activation parse_activation(const Reader& r) {
  // Gemma names it hidden_activation (Gemma 2 has both, and transformers reads that one).
  const json* act = r.find("hidden_activation");
  const char* key = "hidden_activation";
  if (act == nullptr) {
    act = r.find("hidden_act");
    key = "hidden_act";
  }
  if (act == nullptr || *act == "silu") return Activation::kSilu;
  if (*act == "gelu_pytorch_tanh") return Activation::kGeluTanh;
  fail(r.where, std::string("unsupported ") + key + " " + act->dump() + " (supported: silu, gelu_pytorch_tanh)");
}

// A per-layer list of integers (no_rope_layers, mlp_only_layers are read by their own rules).
std::vector<int64_t> integer_list(const Reader& r, const char* key) {
  std::vector<int64_t> out;
  const json* v = r.find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) fail(r.where, std::string("field \"") + key + "\" must be an array of integers");
  for (const json& e : *v) out.push_back(r.as_int(e, key));
  return out;
}

// A hybrid's layer kinds: layer_types ("linear_attention" / "full_attention"), else every
// full_attention_interval-th layer attends (transformers' default 4) and the others are linear.
void parse_layer_kinds(const Reader& r, std::vector<LayerSpec>& layers) {
  if (const json* types = r.find("layer_types")) {
    if (!types->is_array() || types->size() != layers.size())
      fail(r.where, r.name("layer_types") + " must be an array of num_hidden_layers strings");
    for (size_t l = 0; l < layers.size(); ++l) {
      const json& t = (*types)[l];
      if (t == "linear_attention") layers[l].kind = LayerKind::kLinear;
      else if (t != "full_attention")
        fail(r.where, "layer_types[" + std::to_string(l) + "] is " + t.dump() +
                          " (supported: \"full_attention\", \"linear_attention\")");
    }
    return;
  }
  const int64_t interval = r.integer_or("full_attention_interval", 4);
  if (interval == 0) r.bad("full_attention_interval", "must be positive");
  for (size_t l = 0; l < layers.size(); ++l)
    if ((static_cast<int64_t>(l) + 1) % interval != 0) layers[l].kind = LayerKind::kLinear;
}

// The Gated DeltaNet layers' shape (the linear_* keys) and the hybrids' gated attention and (1 + w) norms.
void parse_linear_attention(const Reader& r, ModelConfig& c) {
  c.norm_plus_one = true;
  c.attn_output_gate = true;  // transformers gates whatever attn_output_gate says (every published file: true)
  parse_layer_kinds(r, c.layers);
  LinearAttentionConfig& a = c.linear;
  a.conv_kernel = r.integer("linear_conv_kernel_dim");
  a.key_dim = r.integer("linear_key_head_dim");
  a.value_dim = r.integer("linear_value_head_dim");
  a.key_heads = r.integer("linear_num_key_heads");
  a.value_heads = r.integer("linear_num_value_heads");
  if (a.conv_kernel == 0 || a.key_dim == 0 || a.value_dim == 0 || a.key_heads == 0 || a.value_heads == 0)
    fail(r.where, "the linear_* dimensions (conv kernel, key and value heads and their dims) must be positive");
  if (a.value_heads % a.key_heads != 0)
    fail(r.where, r.name("linear_num_value_heads") + " must be a multiple of linear_num_key_heads");
}

// Gemma's norms, scaling, soft-capping and local RoPE; Phi-3's partial rotary; SmolLM3's no-RoPE layers.
void parse_family_options(const Reader& r, const Architecture& arch, ModelConfig& c) {
  if (arch.gemma_norms) {
    c.norm_plus_one = true;
    c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.query_pre_attn_scalar = r.number_or("query_pre_attn_scalar", static_cast<double>(c.head_dim));
    if (!(c.query_pre_attn_scalar > 0)) fail(r.where, "field \"query_pre_attn_scalar\" must be positive");
    c.attn_softcap = r.number_or("attn_logit_softcapping", 0.0);
    c.final_softcap = r.number_or("final_logit_softcapping", 0.0);
    if (c.attn_softcap < 0 || c.final_softcap < 0) fail(r.where, "soft-capping values must be positive or null");
  } else if (!arch.layer_plan) {  // (Gemma 4's are read by parse_layer_plan)
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"})
      if (r.find(key) != nullptr)
        fail(r.where, std::string("field \"") + key + "\" is not supported for model_type \"" + c.model_type + "\"");
  }
  c.post_norms = !arch.names->post_attn_norm.empty();
  if (arch.local_rope) {
    c.rope_local.theta = r.number_or("rope_local_base_freq", 10000.0);
    for (LayerSpec& l : c.layers)
      if (l.sliding_window > 0) l.rope = LayerRope::kLocal;
  }
  if (arch.partial_rotary) {
    // transformers v5 moves it into rope_parameters (Qwen3.5 repeats it at both places).
    const json* params = r.find("rope_parameters");
    const double top = r.number_or("partial_rotary_factor", arch.rotary_factor_default);
    const double f = params != nullptr && params->is_object()
                         ? ConfigFields{*params, r.where, "rope_parameters"}.number_or("partial_rotary_factor", top)
                         : top;
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * f);
    if (!(f > 0 && f <= 1) || c.rotary_dim == 0 || c.rotary_dim % 2 != 0)
      fail(r.where, "field \"partial_rotary_factor\" must give an even number of rotary dims in (0, head_dim]");
  }
  if (arch.no_rope_layers) {
    const std::vector<int64_t> use = integer_list(r, "no_rope_layers");
    if (!use.empty() && use.size() != c.layers.size())
      fail(r.where, "field \"no_rope_layers\" must have num_hidden_layers entries");
    for (size_t l = 0; l < use.size(); ++l)
      if (use[l] == 0) c.layers[l].rope = LayerRope::kNone;
  }
}

// The experts of Qwen3-MoE and Mixtral, and which layers use them.
void parse_moe(const Reader& r, const Architecture& arch, ModelConfig& c) {
  if (arch.moe == MoeRule::kNone) return;
  MoeConfig& m = c.moe;
  int64_t step = 1;
  std::vector<int64_t> dense;
  if (arch.moe == MoeRule::kGemma4) {
    if (!r.boolean_or("enable_moe_block", false)) return;
    m.num_experts = r.integer_or("num_experts", 0);
    m.intermediate_size = r.integer_or("moe_intermediate_size", 0);
    m.experts_per_tok = r.integer_or("top_k_experts", 0);
    m.renormalize = true;
    m.beside_dense = true;
    if (m.num_experts == 0 || m.experts_per_tok == 0 || m.experts_per_tok > m.num_experts || m.intermediate_size == 0)
      fail(r.where, "enable_moe_block needs num_experts, moe_intermediate_size and top_k_experts in [1, num_experts]");
    for (LayerSpec& l : c.layers) l.sparse_mlp = true;
    return;
  }
  if (arch.moe == MoeRule::kMixtral || arch.moe == MoeRule::kGptOss) {
    m.num_experts = r.integer_or("num_local_experts", 8);
    m.intermediate_size = c.intermediate_size;
    m.renormalize = true;  // gpt-oss: a softmax over the chosen logits, which is the same
  } else {
    m.num_experts = r.integer_or("num_experts", 0);
    m.intermediate_size = r.integer_or("moe_intermediate_size", c.intermediate_size);
    m.renormalize = r.boolean_or("norm_topk_prob", false);
    step = r.integer_or("decoder_sparse_step", 1);
    dense = integer_list(r, "mlp_only_layers");
    if (!arch.names->shared_expert.empty()) m.shared_intermediate_size = r.integer_or("shared_expert_intermediate_size", 0);
  }
  m.experts_per_tok = r.integer_or("num_experts_per_tok", 2);
  if (arch.moe == MoeRule::kGptOss) {
    // OpenAI's name for it; transformers' configs carry both.
    const int64_t k = r.integer_or("experts_per_token", m.experts_per_tok);
    if (r.find("num_experts_per_tok") == nullptr) m.experts_per_tok = k;
    else if (k != m.experts_per_tok)
      fail(r.where, "fields \"experts_per_token\" (" + std::to_string(k) + ") and \"num_experts_per_tok\" (" +
                        std::to_string(m.experts_per_tok) + ") disagree");
    m.biases = true;
    m.swiglu_limit = r.number_or("swiglu_limit", 7.0);
    if (!(m.swiglu_limit > 0) || !std::isfinite(m.swiglu_limit))
      fail(r.where, "field \"swiglu_limit\" must be a positive number");
  }
  if (m.num_experts == 0) return;
  if (m.experts_per_tok == 0 || m.experts_per_tok > m.num_experts || m.intermediate_size == 0 || step == 0)
    fail(r.where, "num_experts_per_tok must be in [1, number of experts], and the expert width and "
                  "decoder_sparse_step positive");
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const bool listed = std::find(dense.begin(), dense.end(), static_cast<int64_t>(l)) != dense.end();
    c.layers[l].sparse_mlp = !listed && (static_cast<int64_t>(l) + 1) % step == 0;
  }
}

}  // namespace

void check_dimensions(const ModelConfig& c, const std::string& where) {
  // Far above any published model, low enough that every product of them that the loader, the memory
  // plan and the kernels form (rows x cols, layers x kv_dim x bytes x context) fits in 64 bits.
  constexpr int64_t kMaxWidth = int64_t{1} << 20, kMaxLayers = int64_t{1} << 16;
  constexpr int64_t kMaxVocab = tokenizer::kMaxVocabSize, kMaxContext = int64_t{1} << 31;
  int64_t q_dim = 0;
  if (__builtin_mul_overflow(c.num_attention_heads, c.head_dim, &q_dim)) q_dim = INT64_MAX;
  const struct {
    const char* name;
    int64_t value, limit;
  } dims[] = {{"hidden_size", c.hidden_size, kMaxWidth},
              {"intermediate_size", c.intermediate_size, kMaxWidth},
              {"num_hidden_layers", c.num_hidden_layers, kMaxLayers},
              {"num_attention_heads", c.num_attention_heads, kMaxWidth},
              {"num_key_value_heads", c.num_key_value_heads, kMaxWidth},
              {"head_dim", c.head_dim, kMaxWidth},
              {"num_attention_heads x head_dim", q_dim, kMaxWidth},
              {"vocab_size", c.vocab_size, kMaxVocab},
              {"max_position_embeddings", c.max_position_embeddings, kMaxContext},
              {"number of experts", c.moe.num_experts, kMaxWidth},
              {"expert intermediate size", c.moe.intermediate_size, kMaxWidth},
              {"shared expert intermediate size", c.moe.shared_intermediate_size, kMaxWidth},
              {"linear_conv_kernel_dim", c.linear.conv_kernel, kMaxWidth},
              {"linear_num_key_heads x linear_key_head_dim", c.linear.key_heads * c.linear.key_dim, kMaxWidth},
              {"linear_num_value_heads x linear_value_head_dim", c.linear.value_heads * c.linear.value_dim, kMaxWidth}};
  for (const auto& d : dims) {
    if (d.value > d.limit)
      fail(where, std::string(d.name) + " is " + std::to_string(d.value) + ", more than Ember's limit of " +
                      std::to_string(d.limit));
  }
  for (const LayerSpec& l : c.layers)  // per-layer head sizes (Gemma 4's global_head_dim)
    if (l.head_dim > kMaxWidth || l.head_dim * c.num_attention_heads > kMaxWidth || l.kv_heads > kMaxWidth)
      fail(where, "a layer's head_dim (" + std::to_string(l.head_dim) + ") times its heads is more than Ember's limit of " +
                      std::to_string(kMaxWidth));
}

float ModelConfig::attention_scale() const {
  const double d = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  return static_cast<float>(1.0 / std::sqrt(d));
}

int64_t ModelConfig::max_q_dim() const {
  int64_t d = q_dim();
  for (size_t l = 0; l < layers.size(); ++l) d = std::max(d, q_dim_of(l));
  return d;
}

int64_t ModelConfig::max_kv_dim() const {
  int64_t d = kv_dim();
  for (size_t l = 0; l < layers.size(); ++l) d = std::max(d, kv_dim_of(l));
  return d;
}

int64_t ModelConfig::max_mlp_width() const {
  int64_t d = intermediate_size;
  for (size_t l = 0; l < layers.size(); ++l) d = std::max(d, mlp_width_of(l));
  return d;
}

std::array<int64_t, 2> ModelConfig::shape(LayerMatrix m, size_t layer) const {
  const int64_t q = q_dim_of(layer), kv = kv_dim_of(layer), width = mlp_width_of(layer);
  switch (m) {
    case LayerMatrix::kQ: return {attn_output_gate ? 2 * q : q, hidden_size};  // gated: [query | gate] per head
    case LayerMatrix::kK:
    case LayerMatrix::kV: return {kv, hidden_size};
    case LayerMatrix::kO: return {hidden_size, q};
    case LayerMatrix::kGate:
    case LayerMatrix::kUp: return {width, hidden_size};
    case LayerMatrix::kDown: return {hidden_size, width};
  }
  return {0, 0};
}

std::array<int64_t, 2> ModelConfig::shape(LayerMatrix m) const { return shape(m, layers.size()); }

bool ModelConfig::has_bias(LayerMatrix m) const {
  switch (m) {
    case LayerMatrix::kQ:
    case LayerMatrix::kK:
    case LayerMatrix::kV: return qkv_bias;
    case LayerMatrix::kO: return o_bias;
    case LayerMatrix::kGate:
    case LayerMatrix::kUp:
    case LayerMatrix::kDown: return mlp_bias;
  }
  return false;
}

int64_t ModelConfig::attention_layers() const {
  if (layers.empty()) return num_hidden_layers;
  return std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.kind == LayerKind::kAttention; });
}

bool ModelConfig::any_sliding_window() const {
  for (const LayerSpec& l : layers)
    if (l.sliding_window > 0) return true;
  return false;
}

ModelConfig parse_config(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    fail(where, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(where, "expected a JSON object");
  const Reader top{j, where, ""};
  // Weights quantized by the checkpoint need kernels for their format: Ember has them for gpt-oss's
  // MXFP4 experts; any other method would leave tensors missing or misread, so it is refused up front.
  bool mxfp4 = false;
  if (const json* q = top.find("quantization_config")) {
    const json* method = q->is_object() && q->contains("quant_method") ? &(*q)["quant_method"] : nullptr;
    mxfp4 = method != nullptr && *method == "mxfp4";
    if (!mxfp4)
      fail(where, "quantization_config.quant_method " + (method != nullptr ? method->dump() : std::string("(none)")) +
                      " is not supported: Ember loads unquantized checkpoints (F32, F16, BF16) and gpt-oss's MXFP4 "
                      "experts, or quantizes them itself with --quantize");
  }
  ModelConfig c;
  const json* mt = top.find("model_type");
  if (mt == nullptr) fail(where, "missing required field \"model_type\"");
  if (!mt->is_string()) fail(where, "field \"model_type\" must be a string (got " + mt->dump() + ")");
  c.model_type = *mt;
  const Architecture* arch = find_architecture(c.model_type);
  if (arch == nullptr)
    fail(where, "unknown model_type \"" + c.model_type + "\" (supported: " + supported_architectures() + ")");
  if (mxfp4 && !arch->names->fused_experts)
    fail(where, "quantization_config.quant_method \"mxfp4\" is only read for gpt-oss's experts, not for model_type \"" +
                    c.model_type + "\"");
  c.moe.mxfp4 = mxfp4;
  // The text model's fields: the top level, or the object the architecture keeps them in.
  const std::string text_key(arch->text_config);
  const json* text_json = text_key.empty() ? &j : top.find(text_key.c_str());
  if (text_json == nullptr || !text_json->is_object())
    fail(where, "model_type \"" + c.model_type + "\" needs the object \"" + text_key + "\" (the text model's config)");
  const Reader r{*text_json, where, ""};

  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.vocab_size = r.integer("vocab_size");
  c.num_key_value_heads = r.integer_or("num_key_value_heads", c.num_attention_heads);
  if (c.hidden_size == 0 || c.num_attention_heads == 0 || c.num_hidden_layers == 0 || c.vocab_size == 0 ||
      c.intermediate_size == 0 || c.num_key_value_heads == 0)
    fail(where, "hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
                "num_key_value_heads and vocab_size must be positive");
  c.head_dim = r.integer_or("head_dim", arch->head_dim_default > 0 ? arch->head_dim_default : c.hidden_size / c.num_attention_heads);
  if (c.head_dim == 0 || c.head_dim % 2 != 0) fail(where, "head_dim must be a positive even number");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(where, "num_attention_heads must be a multiple of num_key_value_heads");
  c.max_position_embeddings = r.integer_or("max_position_embeddings", 2048);
  check_dimensions(c, where);  // before anything is sized by them
  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  // A nested text config's wrapper says it where both do (transformers ties by the outer config).
  c.tie_word_embeddings = top.boolean_or("tie_word_embeddings", r.boolean_or("tie_word_embeddings", arch->tied_by_default));

  c.activation = parse_activation(r);

  const bool attention_bias = r.boolean_or("attention_bias", false);
  c.qkv_bias = arch->bias == BiasRule::kQkv || (arch->bias == BiasRule::kAttentionBias && attention_bias);
  c.o_bias = arch->bias == BiasRule::kAttentionBias && attention_bias;
  c.mlp_bias = r.boolean_or("mlp_bias", false);
  c.qk_norm = arch->qk_norm;
  c.layers = parse_layers(r, *arch, c.num_hidden_layers);
  c.fused_qkv = !arch->names->fused_qkv.empty();
  c.fused_gate_up = !arch->names->fused_gate_up.empty();
  c.attention_sinks = !arch->names->sinks.empty();
  if (arch->linear != LinearRule::kNone) parse_linear_attention(r, c);
  parse_family_options(r, *arch, c);
  parse_rope_settings(*text_json, where, arch->local_rope, c);  // after the rotary dims are known
  check_numbers(c, where, {"field \"rms_norm_eps\"", "field \"rope_theta\""});
  if (arch->layer_plan) parse_layer_plan(r, c);
  parse_moe(r, *arch, c);
  check_dimensions(c, where);  // the experts'

  // A wrapper's own token ids, where it has them, are the whole model's (Gemma 4's end-of-turn among
  // its eos ids); else the text config's.
  const Reader& ids = top.find("eos_token_id") != nullptr ? top : r;
  c.bos_token_id = static_cast<int32_t>((top.find("bos_token_id") != nullptr ? top : r).integer_or("bos_token_id", -1));
  if (const json* eos = ids.find("eos_token_id")) {
    if (eos->is_array()) {
      for (const auto& e : *eos) c.eos_token_ids.push_back(static_cast<int32_t>(ids.as_int(e, "eos_token_id")));
    } else {
      c.eos_token_ids.push_back(static_cast<int32_t>(ids.as_int(*eos, "eos_token_id")));
    }
  }
  return c;
}

void check_numbers(const ModelConfig& c, const std::string& where, const NumberFieldNames& names) {
  if (!(c.rms_norm_eps >= 0)) fail(where, names.rms_norm_eps + " must not be negative (got " + format_number(c.rms_norm_eps) + ")");
  if (!(c.rope.theta > 0)) fail(where, names.rope_theta + " must be positive (got " + format_number(c.rope.theta) + ")");
}

ModelConfig load_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  return parse_config(read_file(path), path);
}

}  // namespace ember::model
