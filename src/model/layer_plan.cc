#include "model/layer_plan.h"

#include <cmath>
#include <string>

#include "base/error.h"

namespace ember::model {

namespace {
// transformers' Gemma4TextConfig defaults.
constexpr int64_t kSlidingHeadDim = 256, kFullHeadDim = 512, kPerLayerInput = 256, kPerLayerVocab = 262144;

// A field that is absent takes its default, but null (or 0) means "none" (hidden_size_per_layer_input).
int64_t integer_null_is_zero(const ConfigFields& r, const char* key, int64_t dflt) {
  if (!r.j.contains(key)) return dflt;
  return r.j[key].is_null() ? 0 : r.as_int(r.j[key], key);
}
}  // namespace

void set_layer_plan_math(ModelConfig& c) {
  c.norm_plus_one = false;
  c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
  c.query_pre_attn_scalar = 1.0;  // the scores' scale is 1^-0.5
  c.value_norm = true;
  c.layer_scalar = true;
}

void parse_layer_plan(const ConfigFields& r, ModelConfig& c) {
  set_layer_plan_math(c);
  c.final_softcap = r.number_or("final_logit_softcapping", 0.0);
  if (c.final_softcap < 0) r.bad("final_logit_softcapping", "must be positive or null");

  const int64_t sliding_dim = r.integer_or("head_dim", kSlidingHeadDim);
  const int64_t full_dim = r.integer_or("global_head_dim", kFullHeadDim);
  for (const auto& [key, d] : {std::pair{"head_dim", sliding_dim}, std::pair{"global_head_dim", full_dim}})
    if (d == 0 || d % 2 != 0) r.bad(key, "must be a positive even number");
  c.head_dim = sliding_dim;
  const bool k_eq_v = r.boolean_or("attention_k_eq_v", false);
  const int64_t full_kv = k_eq_v ? r.integer_or("num_global_key_value_heads", c.num_key_value_heads) : c.num_key_value_heads;
  if (full_kv == 0 || c.num_attention_heads % full_kv != 0)
    r.bad("num_global_key_value_heads", "must divide num_attention_heads");
  c.rope.head_dim = full_dim;        // full layers rotate with rope_parameters.full_attention
  c.rope_local.head_dim = sliding_dim;

  const int64_t n = static_cast<int64_t>(c.layers.size());
  const int64_t shared = r.integer_or("num_kv_shared_layers", 0);
  if (shared >= n) r.bad("num_kv_shared_layers", "must be less than num_hidden_layers");
  const int64_t first_shared = n - shared;
  const bool double_wide = r.boolean_or("use_double_wide_mlp", false);
  for (int64_t l = 0; l < n; ++l) {
    LayerSpec& s = c.layers[static_cast<size_t>(l)];
    const bool full = s.sliding_window == 0;
    s.head_dim = full ? full_dim : sliding_dim;
    s.kv_heads = full ? full_kv : c.num_key_value_heads;
    s.k_eq_v = k_eq_v && full;
    s.rope = full ? LayerRope::kGlobal : LayerRope::kLocal;
    if (l >= first_shared) {
      // The last unshared layer of the same type: its keys have this layer's shape and window.
      for (int64_t j = first_shared - 1; j >= 0 && s.kv_source < 0; --j)
        if ((c.layers[static_cast<size_t>(j)].sliding_window == 0) == full) s.kv_source = j;
      if (s.kv_source < 0)
        r.bad("num_kv_shared_layers", "leaves layer " + std::to_string(l) + " no unshared layer of its type (" +
                                          (full ? "full_attention" : "sliding_attention") + ") to read keys from");
      s.k_eq_v = c.layers[static_cast<size_t>(s.kv_source)].k_eq_v;
      if (double_wide) s.mlp_width = 2 * c.intermediate_size;
    }
  }
  c.per_layer_input = integer_null_is_zero(r, "hidden_size_per_layer_input", kPerLayerInput);
  if (c.per_layer_input > 0) c.per_layer_vocab = r.integer_or("vocab_size_per_layer_input", kPerLayerVocab);
}

}  // namespace ember::model
