// Gemma 4 beyond its goldens' logits (golden_test.cc runs those): every golden in golden/gemma4 states
// the per-layer plan (layer_plan), the inverse frequencies of each layer type (rope_check) and, for
// the MoE model, layer 0's routing of one token (router_check), which must equal what Ember reads and
// computes; the KV cache holds only the layers that compute keys, and forks of it stay correct.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "base/mapped_file.h"
#include "config_testing.h"
#include "gemma4_plan_check.h"
#include "model/model.h"

namespace ember::model {
namespace {

using nlohmann::json;
using test::config_error;
using test::model_config;

std::vector<json> goldens() {
  std::vector<json> out;
  for (const std::string& file : test::golden_jsons("golden/gemma4")) out.push_back(json::parse(read_file(file)));
  return out;
}

const json& case_named(const json& g, const std::string& name) {
  for (const json& c : g["cases"])
    if (c["name"] == name) return c;
  throw std::runtime_error("golden has no case " + name);
}

TEST(Gemma4, LayerPlanEqualsTheGoldens) {
  const std::vector<json> all = goldens();
  ASSERT_FALSE(all.empty());
  for (const json& g : all) {
    SCOPED_TRACE(g["model"].get<std::string>());
    const ModelConfig c = load_config(test::model_dir(g["model"].get<std::string>()));
    test::expect_layer_plan(c, g);
  }
}

TEST(Gemma4, RopeCheckEqualsEachLayerTypesFrequencies) {
  for (const json& g : goldens()) {
    SCOPED_TRACE(g["model"].get<std::string>());
    const ModelConfig c = load_config(test::model_dir(g["model"].get<std::string>()));
    test::expect_rope_check(c, g);
  }
}

// The routing of the forward pass itself (Model::observe_routes), in float32 against the float64
// reference: the same experts in the same order, weights to 1e-4.
TEST(Gemma4, RouterCheckEqualsLayerZerosChoice) {
  size_t checked = 0;
  for (const json& g : goldens()) {
    if (!g.contains("router_check")) continue;
    SCOPED_TRACE(g["model"].get<std::string>());
    const json& check = g["router_check"];
    auto m = Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
    std::vector<std::pair<float, int64_t>> first;  // (weight, expert) of layer 0, token 0
    std::set<int64_t> used;
    m->observe_routes([&](int64_t layer, const std::vector<std::vector<std::pair<int64_t, float>>>& routed) {
      for (size_t e = 0; e < routed.size(); ++e)
        for (const auto& [token, weight] : routed[e]) {
          used.insert(static_cast<int64_t>(e));
          if (layer == 0 && token == 0) first.emplace_back(weight, static_cast<int64_t>(e));
        }
    });
    const auto ids = case_named(g, check["prompt"].get<std::string>())["prompt_ids"].get<std::vector<int32_t>>();
    auto cache = m->make_cache(static_cast<int64_t>(ids.size()));
    KvSequence seq(*cache);
    m->forward(seq, ids);
    std::sort(first.begin(), first.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const auto topk = check["layer0_first_token_topk"].get<std::vector<int64_t>>();
    const auto weights = check["layer0_first_token_weights"].get<std::vector<double>>();
    ASSERT_EQ(first.size(), topk.size());
    for (size_t k = 0; k < topk.size(); ++k) {
      EXPECT_EQ(first[k].second, topk[k]) << k;
      EXPECT_NEAR(first[k].first, weights[k], 1e-4) << k;
    }
    EXPECT_EQ(std::vector<int64_t>(used.begin(), used.end()), check["experts_used"].get<std::vector<int64_t>>());
    ++checked;
  }
  EXPECT_GT(checked, 0u) << "no golden in golden/gemma4 has a router_check";
}

// What a token of context costs: the keys and values of the layers that compute them, by the
// golden's plan; a layer reading another's attends over that layer's blocks.
TEST(Gemma4, KvCacheHoldsOnlyTheUnsharedLayers) {
  for (const json& g : goldens()) {
    SCOPED_TRACE(g["model"].get<std::string>());
    const ModelConfig c = load_config(test::model_dir(g["model"].get<std::string>()));
    int64_t want = 0;
    for (const json& p : g["layer_plan"])
      if (!p["kv_shared"].get<bool>()) want += 2 * p["kv_heads"].get<int64_t>() * p["head_dim"].get<int64_t>() * 4;
    EXPECT_EQ(KvCache::bytes_per_token(c, kernels::KvType::F32), want);
    KvCache cache(c, 4, 2, kernels::KvType::F32);
    KvSequence s(cache);
    s.extend(3);
    KvBatchView a, b;
    const KvSequence* seqs[] = {&s};
    for (const json& p : g["layer_plan"]) {
      const kernels::KvView mine = a.build(seqs, p["layer"].get<int64_t>())[0];
      const kernels::KvView source = b.build(seqs, p["kv_from_layer"].get<int64_t>())[0];
      EXPECT_EQ(mine.k_blocks[1], source.k_blocks[1]);
      EXPECT_EQ(mine.v_blocks[0], source.v_blocks[0]);
    }
  }
}

// gemma-4-E2B's published config (bench/models): a token of context costs the keys and values of
// its first num_hidden_layers - num_kv_shared_layers layers only, at each layer type's head width,
// and every later layer attends over the last unshared layer of its own type.
TEST(Gemma4, E2bMemoryPlanCountsTheUnsharedLayersOnly) {
  const std::string dir = std::string(EMBER_SOURCE_DIR) + "/bench/models/gemma-4-e2b-it";
  const json t = json::parse(read_file(dir + "/config.json"))["text_config"];
  const ModelConfig c = load_config(dir);
  const int64_t n = t["num_hidden_layers"], shared = t["num_kv_shared_layers"], kv_heads = t["num_key_value_heads"];
  ASSERT_GT(shared, 0);
  ASSERT_EQ(c.layers.size(), static_cast<size_t>(n));
  int64_t want = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool full = t["layer_types"][i] == "full_attention";
    const int64_t width = full ? t["global_head_dim"].get<int64_t>() : t["head_dim"].get<int64_t>();
    if (i < n - shared) want += 2 * kv_heads * width * 2;  // keys and values in F16
    int64_t source = i;
    if (i >= n - shared)
      for (int64_t j = n - shared - 1; j >= 0; --j)
        if (t["layer_types"][j] == t["layer_types"][i]) {
          source = j;
          break;
        }
    EXPECT_EQ(c.kv_layer_of(static_cast<size_t>(i)), source) << "layer " << i;
  }
  EXPECT_EQ(KvCache::bytes_per_token(c, kernels::KvType::F16), want);
}

// Forks of a prefilled prefix (a shared system prompt, beams) continue bit for bit as a sequence
// that computed the same prefix itself does, and writing into them leaves the prefix's owner as it
// was: the shared layers read the fork's own copy of their source layer's blocks.
TEST(Gemma4, ForkedPrefixContinuesAsAnUnsharedSequence) {
  for (const json& g : goldens()) {
    SCOPED_TRACE(g["model"].get<std::string>());
    auto m = Model::load(test::model_dir(g["model"].get<std::string>()), {.threads = 2, .progress = {}});
    const auto ids = case_named(g, "long")["prompt_ids"].get<std::vector<int32_t>>();
    auto cache = m->make_cache(8 * static_cast<int64_t>(ids.size()), 4);
    const size_t prefix = 13;  // mid-block, past the window
    const std::span<const int32_t> head(ids.data(), prefix);
    KvSequence base(*cache);
    m->forward(base, head);
    for (size_t tail : {size_t{1}, size_t{7}}) {
      SCOPED_TRACE("tail " + std::to_string(tail));
      const std::span<const int32_t> rest(ids.data() + prefix, tail);
      KvSequence fork = base.fork();
      const std::vector<float> forked = m->forward(fork, rest);
      KvSequence own(*cache);
      m->forward(own, head);
      EXPECT_EQ(forked, m->forward(own, rest));
    }
    KvSequence again = base.fork();  // the owner's blocks were copied before the forks wrote
    KvSequence own(*cache);
    m->forward(own, head);
    const std::span<const int32_t> next(ids.data() + prefix, 3);
    EXPECT_EQ(m->forward(again, next), m->forward(own, next));
  }
}

TEST(Gemma4, ConfigRulesAndErrorsNameTheField) {
  json dense = model_config("tiny-gemma4-bf16");
  json& text = dense["text_config"];
  text.erase("layer_types");  // transformers' default: every 6th layer full, and the last
  text["num_hidden_layers"] = 8;
  text["num_kv_shared_layers"] = 0;
  const ModelConfig c = parse_config(dense.dump(), "config.json");
  for (size_t l = 0; l < c.layers.size(); ++l)
    EXPECT_EQ(c.layers[l].sliding_window == 0, l == 5 || l == 7) << l;

  json shared = model_config("tiny-gemma4-bf16");
  shared["text_config"]["num_kv_shared_layers"] = 5;  // layer 1 is full, and no unshared layer is
  EXPECT_MENTIONS(config_error(shared), "num_kv_shared_layers");
  json rope = model_config("tiny-gemma4-bf16");
  rope["text_config"]["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 1.5;
  EXPECT_MENTIONS(config_error(rope), "rope_parameters.full_attention.partial_rotary_factor");
  json nested = model_config("tiny-gemma4-bf16");
  nested.erase("text_config");
  EXPECT_MENTIONS(config_error(nested), "text_config");

  json wrapped = model_config("tiny-gemma4-bf16");  // the wrapper's eos ids (end of turn too) win
  wrapped["eos_token_id"] = {2, 106};
  EXPECT_EQ(parse_config(wrapped.dump(), "config.json").eos_token_ids, (std::vector<int32_t>{2, 106}));
  EXPECT_EQ(parse_config(model_config("tiny-gemma4-bf16").dump(), "config.json").eos_token_ids,
            (std::vector<int32_t>{model_config("tiny-gemma4-bf16")["text_config"]["eos_token_id"].get<int32_t>()}));

  // Gemma4ForCausalLM: the same keys at the top level.
  json flat = model_config("tiny-gemma4-bf16")["text_config"];
  const ModelConfig f = parse_config(flat.dump(), "config.json");
  EXPECT_EQ(f.model_type, "gemma4_text");
  EXPECT_EQ(f.per_layer_input, flat["hidden_size_per_layer_input"].get<int64_t>());
  flat["hidden_size_per_layer_input"] = nullptr;  // null: no per-layer embeddings
  EXPECT_EQ(parse_config(flat.dump(), "config.json").per_layer_input, 0);
}

}  // namespace
}  // namespace ember::model
