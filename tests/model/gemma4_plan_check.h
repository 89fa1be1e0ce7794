#pragma once
// A Gemma 4 golden's layer_plan and rope_check blocks (../shared/testdata/golden/gemma4/README.md)
// against a ModelConfig, whichever format it was read from (a Hugging Face folder or a GGUF file).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace ember::test {

// Each layer's type, window, head size, kv heads, keys-as-values, KV source and MLP width.
inline void expect_layer_plan(const model::ModelConfig& c, const nlohmann::json& golden) {
  using model::LayerRope;
  ASSERT_EQ(c.layers.size(), golden["layer_plan"].size());
  for (const nlohmann::json& p : golden["layer_plan"]) {
    const auto l = p["layer"].get<size_t>();
    SCOPED_TRACE("layer " + std::to_string(l));
    const model::LayerSpec& s = c.layers[l];
    EXPECT_EQ(s.sliding_window > 0, p["type"] == "sliding_attention");
    EXPECT_EQ(s.sliding_window, p["window"].is_null() ? 0 : p["window"].get<int64_t>());
    EXPECT_EQ(c.head_dim_of(l), p["head_dim"].get<int64_t>());
    EXPECT_EQ(c.kv_heads_of(l), p["kv_heads"].get<int64_t>());
    EXPECT_EQ(s.k_eq_v, p["k_eq_v"].get<bool>());
    EXPECT_EQ(s.kv_source >= 0, p["kv_shared"].get<bool>());
    EXPECT_EQ(c.kv_layer_of(l), p["kv_from_layer"].get<int64_t>());
    EXPECT_EQ(c.mlp_width_of(l), p["mlp_width"].get<int64_t>());
    EXPECT_EQ(s.rope, s.sliding_window > 0 ? LayerRope::kLocal : LayerRope::kGlobal);
  }
}

// Each layer type's head size, attention scaling and inverse frequencies, to 1e-13 relative, or
// `zero_slack` absolute where the golden's is 0 (a GGUF's rope_freqs.weight divides the frequencies
// proportional RoPE leaves unrotated by 1e30, llama.cpp's form of their zeros).
inline void expect_rope_check(const model::ModelConfig& c, const nlohmann::json& golden, double zero_slack = 0) {
  ASSERT_FALSE(golden["rope_check"].empty());
  for (const auto& [type, check] : golden["rope_check"].items()) {
    SCOPED_TRACE(type);
    ASSERT_TRUE(type == "full_attention" || type == "sliding_attention");
    const model::RopeConfig& rope = type == "full_attention" ? c.rope : c.rope_local;
    EXPECT_EQ(rope.head_dim, check["head_dim"].get<int64_t>());
    EXPECT_EQ(rope.attention_factor, check["attention_scaling"].get<double>());
    const std::vector<double> got = model::rope_inv_freq(c, rope, 1);
    const nlohmann::json& want = check["inv_freq"];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i].get<double>(), 1e-13 * want[i].get<double>() + zero_slack) << i;
  }
}

}  // namespace ember::test
