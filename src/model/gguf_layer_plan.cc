#include "model/gguf_layer_plan.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "model/layer_plan.h"

namespace ember::model {

namespace {

// The sliding layers' head size: key_length_swa, with value_length_swa and rope.dimension_count_swa
// equal to it (Ember runs no partial rotary and no value size of its own on them).
int64_t sliding_head_dim(const ArchKeys& k, int64_t full_dim) {
  const std::string& where = k.g.path();
  const int64_t d = k.positive_or("attention.key_length_swa", full_dim);
  if (d % 2 != 0) fail(where, "metadata " + k.key("attention.key_length_swa") + " must be even (got " + std::to_string(d) + ")");
  if (k.positive_or("attention.value_length_swa", d) != d)
    fail(where, "metadata " + k.key("attention.value_length_swa") + " differs from attention.key_length_swa (not supported)");
  if (const int64_t rot = k.positive_or("rope.dimension_count_swa", d); rot != d)
    fail(where, "metadata " + k.key("rope.dimension_count_swa") + " is " + std::to_string(rot) +
                    " but the sliding layers' head dimension is " + std::to_string(d) + " (partial rotary is not supported there)");
  return d;
}

// The per-layer embeddings: their width from the key, the table's rows from the tensor (no key
// carries vocab_size_per_layer_input). A table without the width, or the width without a table, is
// refused.
void read_per_layer_embeddings(const ArchKeys& k, const Gemma4Names& names, ModelConfig& c) {
  const std::string& where = k.g.path();
  const std::string width_key = k.key("embedding_length_per_layer_input");
  c.per_layer_input = k.g.get_int_or(width_key, 0);
  if (c.per_layer_input < 0) fail(where, "metadata " + width_key + " must not be negative");
  const std::string table(names.ple_table);
  const GgufTensor* t = k.g.find_tensor(table);
  if (c.per_layer_input == 0) {
    if (t != nullptr) fail(where, "tensor " + table + " is present but metadata " + width_key + " is missing or 0");
    return;
  }
  if (t == nullptr) fail(where, "tensor " + table + " is missing (metadata " + width_key + " is " + std::to_string(c.per_layer_input) + ")");
  if (t->shape.size() != 2) fail(where, "tensor " + table + " must be a matrix");
  c.per_layer_vocab = t->shape[0];
}

}  // namespace

void read_gguf_layer_plan(const ArchKeys& k, const GgufArchitecture& ga, ModelConfig& c) {
  const std::string& where = k.g.path();
  if (ga.names->gemma4 == nullptr) fail(where, "GGUF arch " + k.arch + " names none of Gemma 4's tensors");
  set_layer_plan_math(c);
  k.positive("attention.sliding_window");  // the pattern's sliding layers need their window
  const int64_t full_dim = c.head_dim, sliding_dim = sliding_head_dim(k, full_dim);
  c.head_dim = sliding_dim;
  c.rope.head_dim = full_dim;  // rope_freqs.weight (read as the full layers' divisors) spans it
  c.rope_local.head_dim = sliding_dim;

  const int64_t n = c.num_hidden_layers;
  const std::vector<int64_t> kv = k.per_layer_or("attention.head_count_kv", n, c.num_attention_heads);
  const std::vector<int64_t> width = k.per_layer("feed_forward_length", n);
  const std::string shared_key = k.key("attention.shared_kv_layers");
  const int64_t shared = k.g.get_int_or(shared_key, 0);
  if (shared < 0 || shared >= n)
    fail(where, "metadata " + shared_key + " is " + std::to_string(shared) + " (it must be in [0, block_count " + std::to_string(n) + "))");
  const int64_t first_shared = n - shared;
  for (int64_t l = 0; l < n; ++l) {
    LayerSpec& s = c.layers[static_cast<size_t>(l)];
    const bool full = s.sliding_window == 0;
    const auto i = static_cast<size_t>(l);
    s.head_dim = full ? full_dim : sliding_dim;
    s.kv_heads = kv[i];
    if (c.num_attention_heads % kv[i] != 0)
      fail(where, "metadata " + k.key("attention.head_count_kv") + " is " + std::to_string(kv[i]) + " on layer " + std::to_string(l) +
                      ", which is not a divisor of attention.head_count " + std::to_string(c.num_attention_heads));
    s.mlp_width = width[i];
    if (l < first_shared) {
      // llama.cpp: a layer without attn_v uses its keys as values (Gemma 4's attention_k_eq_v).
      s.k_eq_v = k.g.find_tensor(ga.names->matrix(l, LayerMatrix::kV)) == nullptr;
      continue;
    }
    // llama.cpp's rule: every shared layer reads layer first_shared - 1 if full, first_shared - 2 if
    // sliding (transformers' last unshared layer of the type where those are full and sliding).
    const int64_t source = first_shared - (full ? 1 : 2);
    const LayerSpec* src = source >= 0 ? &c.layers[static_cast<size_t>(source)] : nullptr;
    if (src == nullptr || src->sliding_window != s.sliding_window || kv[static_cast<size_t>(source)] != kv[i])
      fail(where, "metadata " + shared_key + " is " + std::to_string(shared) + ": layer " + std::to_string(l) + " (" +
                      (full ? "full" : "sliding") + ") would read the keys of layer " + std::to_string(source) +
                      " as llama.cpp does, which " + (src == nullptr ? "does not exist" : "has another attention shape"));
    s.kv_source = source;
    s.k_eq_v = src->k_eq_v;
  }
  read_per_layer_embeddings(k, *ga.names->gemma4, c);
}

}  // namespace ember::model
