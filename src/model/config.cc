#include "model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/mapped_file.h"
#include "model/architecture.h"

namespace ember::model {

namespace {

using nlohmann::json;

// Field readers that name the file and field in every error.
struct Reader {
  const json& j;
  const std::string& where;

  const json* find(const char* key) const {
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
  }
  int64_t integer(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) fail(where, std::string("missing required field \"") + key + "\"");
    return as_int(*v, key);
  }
  int64_t integer_or(const char* key, int64_t dflt) const {
    const json* v = find(key);
    return v == nullptr ? dflt : as_int(*v, key);
  }
  double number_or(const char* key, double dflt) const {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (!v->is_number()) fail(where, std::string("field \"") + key + "\" must be a number");
    return v->get<double>();
  }
  bool boolean_or(const char* key, bool dflt) const {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (!v->is_boolean()) fail(where, std::string("field \"") + key + "\" must be true or false");
    return v->get<bool>();
  }
  int64_t as_int(const json& v, const char* key) const {
    if (!v.is_number_integer()) fail(where, std::string("field \"") + key + "\" must be an integer");
    const int64_t x = v.get<int64_t>();
    if (x < 0) fail(where, std::string("field \"") + key + "\" must not be negative");
    return x;
  }
};

void parse_rope_scaling(const json& rs, const std::string& where, ModelConfig& c) {
  if (!rs.is_object()) fail(where, "field \"rope_scaling\" must be an object or null");
  std::string type;
  if (auto it = rs.find("rope_type"); it != rs.end() && it->is_string()) type = *it;
  else if (auto it2 = rs.find("type"); it2 != rs.end() && it2->is_string()) type = *it2;
  else fail(where, "rope_scaling has no \"rope_type\" (or \"type\")");
  const Reader r{rs, where};
  if (type == "default") {
    c.rope.scaling = RopeScaling::None;
    return;
  }
  if (type == "linear") c.rope.scaling = RopeScaling::Linear;
  else if (type == "dynamic") c.rope.scaling = RopeScaling::Dynamic;
  else if (type == "llama3") c.rope.scaling = RopeScaling::Llama3;
  else fail(where, "unsupported rope_scaling type \"" + type + "\" (supported: default, linear, dynamic, llama3)");
  c.rope.factor = r.number_or("factor", 0.0);
  if (!(c.rope.factor > 0.0)) fail(where, "rope_scaling.factor must be a positive number");
  if (c.rope.scaling == RopeScaling::Llama3) {
    c.rope.low_freq_factor = r.number_or("low_freq_factor", 1.0);
    c.rope.high_freq_factor = r.number_or("high_freq_factor", 4.0);
    c.rope.original_max_position_embeddings = r.integer("original_max_position_embeddings");
    if (c.rope.high_freq_factor <= c.rope.low_freq_factor)
      fail(where, "rope_scaling.high_freq_factor must be larger than low_freq_factor");
  }
}

// Each layer's attention window: config.json's layer_types where given, else the architecture's rule.
std::vector<LayerSpec> parse_layers(const Reader& r, const Architecture& arch, int64_t n_layers) {
  std::vector<LayerSpec> layers(static_cast<size_t>(n_layers));
  if (arch.window == WindowRule::kNone) return layers;
  const bool on = arch.window == WindowRule::kAllLayers || r.boolean_or("use_sliding_window", false);
  const int64_t window = on ? r.integer_or("sliding_window", 0) : 0;
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
  // transformers' Qwen2/Qwen3: the window applies from layer max_window_layers on.
  const int64_t first = arch.window == WindowRule::kFromMaxWindow ? r.integer_or("max_window_layers", 28) : 0;  // transformers' default
  for (int64_t l = first; l < n_layers; ++l) layers[static_cast<size_t>(l)].sliding_window = window;
  return layers;
}

}  // namespace

std::array<int64_t, 2> ModelConfig::shape(LayerMatrix m) const {
  switch (m) {
    case LayerMatrix::kQ: return {q_dim(), hidden_size};
    case LayerMatrix::kK:
    case LayerMatrix::kV: return {kv_dim(), hidden_size};
    case LayerMatrix::kO: return {hidden_size, q_dim()};
    case LayerMatrix::kGate:
    case LayerMatrix::kUp: return {intermediate_size, hidden_size};
    case LayerMatrix::kDown: return {hidden_size, intermediate_size};
  }
  return {0, 0};
}

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
  const Reader r{j, where};
  ModelConfig c;
  const json* mt = r.find("model_type");
  if (mt == nullptr || !mt->is_string()) fail(where, "missing required field \"model_type\"");
  c.model_type = *mt;
  const Architecture* arch = find_architecture(c.model_type);
  if (arch == nullptr)
    fail(where, "unknown model_type \"" + c.model_type + "\" (supported: " + supported_architectures() + ")");

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
  c.head_dim = r.integer_or("head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim == 0 || c.head_dim % 2 != 0) fail(where, "head_dim must be a positive even number");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(where, "num_attention_heads must be a multiple of num_key_value_heads");
  c.max_position_embeddings = r.integer_or("max_position_embeddings", 2048);
  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  c.rope.theta = r.number_or("rope_theta", 10000.0);
  if (const json* rs = r.find("rope_scaling")) parse_rope_scaling(*rs, where, c);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);

  if (const json* act = r.find("hidden_act"); act != nullptr && *act != "silu")
    fail(where, "unsupported hidden_act \"" + act->dump() + "\" (supported: silu)");

  const bool attention_bias = r.boolean_or("attention_bias", false);
  c.qkv_bias = arch->bias == BiasRule::kQkv || (arch->bias == BiasRule::kAttentionBias && attention_bias);
  c.o_bias = arch->bias == BiasRule::kAttentionBias && attention_bias;
  c.mlp_bias = r.boolean_or("mlp_bias", false);
  c.qk_norm = arch->qk_norm;
  c.layers = parse_layers(r, *arch, c.num_hidden_layers);

  c.bos_token_id = static_cast<int32_t>(r.integer_or("bos_token_id", -1));
  if (const json* eos = r.find("eos_token_id")) {
    if (eos->is_array()) {
      for (const auto& e : *eos) c.eos_token_ids.push_back(static_cast<int32_t>(r.as_int(e, "eos_token_id")));
    } else {
      c.eos_token_ids.push_back(static_cast<int32_t>(r.as_int(*eos, "eos_token_id")));
    }
  }
  return c;
}

ModelConfig load_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  return parse_config(read_file(path), path);
}

std::vector<double> rope_inv_freq(const ModelConfig& c, int64_t seq_len) {
  const int64_t d = c.head_dim;
  double base = c.rope.theta;
  if (c.rope.scaling == RopeScaling::Dynamic && seq_len > c.max_position_embeddings) {
    // NTK-aware scaling: grow the base once the sequence outruns the trained context.
    const double f = c.rope.factor;
    base *= std::pow(f * static_cast<double>(seq_len) / static_cast<double>(c.max_position_embeddings) - (f - 1.0),
                     static_cast<double>(d) / static_cast<double>(d - 2));
  }
  std::vector<double> inv(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) inv[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d));
  if (c.rope.scaling == RopeScaling::Linear) {
    for (auto& f : inv) f /= c.rope.factor;
  } else if (c.rope.scaling == RopeScaling::Llama3) {
    const double old_ctx = static_cast<double>(c.rope.original_max_position_embeddings);
    const double low_wavelen = old_ctx / c.rope.low_freq_factor;
    const double high_wavelen = old_ctx / c.rope.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= c.rope.factor;
      } else {
        const double smooth = (old_ctx / wavelen - c.rope.low_freq_factor) / (c.rope.high_freq_factor - c.rope.low_freq_factor);
        f = (1.0 - smooth) * f / c.rope.factor + smooth * f;
      }
    }
  }
  if (!c.rope.freq_divisors.empty())
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= c.rope.freq_divisors[i];
  return inv;
}

}  // namespace ember::model
