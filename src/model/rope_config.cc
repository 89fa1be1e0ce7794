#include "model/rope_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "model/config_fields.h"

namespace ember::model {

namespace {

using nlohmann::json;

// One RoPE object's fields; every error names the key by its path ("rope_scaling.beta_fast").
using RopeFields = ConfigFields;

// As transformers' _compute_yarn_parameters: factor from the object (the ratio of the contexts
// only where it is absent), attention scaling from attention_factor or mscale / mscale_all_dim.
void parse_yarn(const RopeFields& r, const ModelConfig& c, RopeConfig& rope) {
  const std::optional<int64_t> original = r.positive_integer("original_max_position_embeddings");
  rope.original_max_position_embeddings = original.value_or(c.max_position_embeddings);
  if (const std::optional<double> f = r.positive("factor")) rope.factor = *f;
  else if (original) rope.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(*original);
  else r.bad("factor", "must be a positive number");
  rope.beta_fast = r.positive("beta_fast").value_or(32.0);
  rope.beta_slow = r.positive("beta_slow").value_or(1.0);
  rope.truncate = r.boolean_or("truncate", true);
  if (const std::optional<double> a = r.positive("attention_factor")) {
    rope.attention_factor = *a;
    return;
  }
  const double mscale = r.number("mscale").value_or(0.0), all_dims = r.number("mscale_all_dim").value_or(0.0);
  rope.attention_factor = mscale != 0.0 && all_dims != 0.0
                              ? yarn_mscale(rope.factor, mscale) / yarn_mscale(rope.factor, all_dims)
                              : yarn_mscale(rope.factor);
}

// As transformers' _compute_longrope_parameters: Phi-3 sets original_max_position_embeddings beside
// max_position_embeddings, and their ratio is the factor of the attention scaling.
void parse_longrope(const RopeFields& r, const json& top, const ModelConfig& c, RopeConfig& rope) {
  std::optional<int64_t> original = r.positive_integer("original_max_position_embeddings");
  if (!original) original = RopeFields{top, r.where, "config"}.positive_integer("original_max_position_embeddings");
  rope.original_max_position_embeddings = original.value_or(c.max_position_embeddings);
  rope.factor = original ? static_cast<double>(c.max_position_embeddings) / static_cast<double>(*original)
                         : r.positive("factor").value_or(1.0);
  const int64_t n = c.rope_dim() / 2;
  const char* what = "one per rotary frequency: rotary dims / 2";
  rope.short_factor = r.positives("short_factor", n, what);
  rope.long_factor = r.positives("long_factor", n, what);
  const double ctx = static_cast<double>(rope.original_max_position_embeddings);
  rope.attention_factor = r.positive("attention_factor")
                              .value_or(rope.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(rope.factor) / std::log(ctx)));
}

// One RoPE object: rope_scaling, or (with_theta) rope_parameters or one of its per-layer-type entries.
RopeConfig parse_rope(const RopeFields& r, const json& top, const ModelConfig& c, bool with_theta, RopeConfig rope) {
  if (!r.j.is_object()) fail(r.where, "field \"" + r.path + "\" must be an object or null");
  const json* t = r.find("rope_type");
  const bool legacy = t == nullptr;
  if (legacy) t = r.find("type");
  if (t == nullptr || !t->is_string()) fail(r.where, r.path + " has no \"rope_type\" (or \"type\")");
  std::string type = *t;
  // transformers' Phi3Config reads the older names in "type" as longrope.
  if (c.model_type == "phi3" && legacy && (type == "su" || type == "yarn")) type = "longrope";
  if (with_theta) rope.theta = r.positive("rope_theta").value_or(rope.theta);
  if (type == "default") {
    rope.scaling = RopeScaling::None;
    return rope;
  }
  if (type == "yarn") {
    rope.scaling = RopeScaling::Yarn;
    parse_yarn(r, c, rope);
    return rope;
  }
  if (type == "proportional") {  // Gemma 4's full layers
    rope.scaling = RopeScaling::Proportional;
    rope.partial_rotary_factor = r.number("partial_rotary_factor").value_or(1.0);
    if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1))
      r.bad("partial_rotary_factor", "must be in (0, 1]");
    rope.factor = r.positive("factor").value_or(1.0);
    return rope;
  }
  if (type == "longrope") {
    rope.scaling = RopeScaling::LongRope;
    parse_longrope(r, top, c, rope);
    return rope;
  }
  if (type == "linear") rope.scaling = RopeScaling::Linear;
  else if (type == "dynamic") rope.scaling = RopeScaling::Dynamic;
  else if (type == "llama3") rope.scaling = RopeScaling::Llama3;
  else
    fail(r.where, "unsupported " + r.path + " type \"" + type +
                      "\" (supported: default, linear, dynamic, llama3, yarn, longrope, proportional)");
  const std::optional<double> factor = r.positive("factor");
  if (!factor) r.bad("factor", "must be a positive number");
  rope.factor = *factor;
  if (rope.scaling == RopeScaling::Llama3) {
    rope.low_freq_factor = r.number("low_freq_factor").value_or(1.0);
    rope.high_freq_factor = r.number("high_freq_factor").value_or(4.0);
    const std::optional<int64_t> original = r.positive_integer("original_max_position_embeddings");
    if (!original) r.bad("original_max_position_embeddings", "is required for llama3 scaling");
    rope.original_max_position_embeddings = *original;
    if (rope.high_freq_factor <= rope.low_freq_factor) r.bad("high_freq_factor", "must be larger than low_freq_factor");
  }
  return rope;
}

}  // namespace

void parse_rope_settings(const json& j, const std::string& where, bool local_rope, ModelConfig& c) {
  const ConfigFields top{j, where, ""};
  if (const std::optional<double> theta = top.number("rope_theta")) c.rope.theta = *theta;
  const json* params = top.find("rope_parameters");
  if (params == nullptr) {
    if (const json* rs = top.find("rope_scaling")) c.rope = parse_rope({*rs, where, "rope_scaling"}, j, c, false, c.rope);
    return;
  }
  // transformers v5: rope_theta and rope_scaling are ignored where rope_parameters is present.
  if (!params->is_object()) fail(where, "field \"rope_parameters\" must be an object");
  const RopeConfig start{.theta = c.rope.theta};
  const ConfigFields per_type{*params, where, "rope_parameters"};
  const json* full = per_type.find("full_attention");
  const json* sliding = per_type.find("sliding_attention");
  if (full == nullptr && sliding == nullptr) {
    c.rope = parse_rope({*params, where, "rope_parameters"}, j, c, true, start);
    return;
  }
  if (local_rope) {  // Gemma 3: the sliding layers rotate with their own entry
    if (full == nullptr) fail(where, "rope_parameters has \"sliding_attention\" but no \"full_attention\"");
    c.rope = parse_rope({*full, where, "rope_parameters.full_attention"}, j, c, true, start);
    if (sliding != nullptr)
      c.rope_local = parse_rope({*sliding, where, "rope_parameters.sliding_attention"}, j, c, true, c.rope_local);
    return;
  }
  if (full != nullptr && sliding != nullptr && *full != *sliding)
    fail(where, "rope_parameters.sliding_attention differs from full_attention, but model_type \"" + c.model_type +
                    "\" rotates every layer alike");
  c.rope = full != nullptr ? parse_rope({*full, where, "rope_parameters.full_attention"}, j, c, true, start)
                           : parse_rope({*sliding, where, "rope_parameters.sliding_attention"}, j, c, true, start);
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

std::vector<double> rope_inv_freq(const ModelConfig& c, int64_t seq_len) { return rope_inv_freq(c, c.rope, seq_len); }

std::vector<double> rope_inv_freq(const ModelConfig& mc, const RopeConfig& c, int64_t seq_len) {
  const int64_t d = c.head_dim > 0 ? c.head_dim : mc.rope_dim();
  double base = c.theta;
  if (c.scaling == RopeScaling::Dynamic && seq_len > mc.max_position_embeddings) {
    // NTK-aware scaling: grow the base once the sequence outruns the trained context.
    const double f = c.factor;
    base *= std::pow(f * static_cast<double>(seq_len) / static_cast<double>(mc.max_position_embeddings) - (f - 1.0),
                     static_cast<double>(d) / static_cast<double>(d - 2));
  }
  std::vector<double> inv(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) inv[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d));
  if (c.scaling == RopeScaling::Linear) {
    for (auto& f : inv) f /= c.factor;
  } else if (c.scaling == RopeScaling::Llama3) {
    const double old_ctx = static_cast<double>(c.original_max_position_embeddings);
    const double low_wavelen = old_ctx / c.low_freq_factor;
    const double high_wavelen = old_ctx / c.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= c.factor;
      } else {
        const double smooth = (old_ctx / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
        f = (1.0 - smooth) * f / c.factor + smooth * f;
      }
    }
  } else if (c.scaling == RopeScaling::Yarn) {
    // Dims that turn more than beta_fast times over the original context keep their frequency, those
    // under beta_slow are divided by the factor, and a linear ramp blends the dims between.
    const double dims = static_cast<double>(d), ctx = static_cast<double>(c.original_max_position_embeddings);
    auto dim_of = [&](double turns) { return dims * std::log(ctx / (turns * 2.0 * M_PI)) / (2.0 * std::log(base)); };
    double low = dim_of(c.beta_fast), high = dim_of(c.beta_slow);
    if (c.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dims - 1.0);
    if (low == high) high += 0.001;  // as transformers: no division by zero
    for (size_t i = 0; i < inv.size(); ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      inv[i] = inv[i] / c.factor * ramp + inv[i] * (1.0 - ramp);
    }
  } else if (c.scaling == RopeScaling::Proportional) {
    // As transformers' proportional RoPE: int(partial_rotary_factor * d // 2) frequencies kept, with
    // their exponents over the whole head; the others are zero, so their pairs do not turn.
    const auto kept = static_cast<size_t>(std::floor(c.partial_rotary_factor * static_cast<double>(d) / 2.0));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = i < kept ? inv[i] / c.factor : 0.0;
  } else if (c.scaling == RopeScaling::LongRope) {
    const std::vector<double>& f = seq_len > c.original_max_position_embeddings ? c.long_factor : c.short_factor;
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= f[i];
  }
  if (!c.freq_divisors.empty())
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= c.freq_divisors[i];
  return inv;
}

}  // namespace ember::model
