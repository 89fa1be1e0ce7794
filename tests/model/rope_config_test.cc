// RoPE settings from config.json: every golden in golden/rope/ (and gpt-oss/) states the exact inverse frequencies
// and attention scaling its model's config gives (rope_check); transformers v5's rope_parameters
// reads as the 4.x keys it replaces; bad values are errors that name the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "config_testing.h"
#include "model/config.h"

namespace ember::model {
namespace {

using nlohmann::json;
using test::config_error;
using test::model_config;

void expect_inv_freq(const std::vector<double>& got, const json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i].get<double>(), 1e-13 * want[i].get<double>()) << i;
}

void expect_same_rope(const RopeConfig& a, const RopeConfig& b) {
  EXPECT_EQ(a.theta, b.theta);
  EXPECT_EQ(a.scaling, b.scaling);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.low_freq_factor, b.low_freq_factor);
  EXPECT_EQ(a.high_freq_factor, b.high_freq_factor);
  EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
  EXPECT_EQ(a.attention_factor, b.attention_factor);
  EXPECT_EQ(a.short_factor, b.short_factor);
  EXPECT_EQ(a.long_factor, b.long_factor);
}

// golden/rope/'s files and gpt-oss's (YaRN with truncate false). An MXFP4 folder's config is read
// without its quantization_config, which the loader refuses before anything else.
TEST(RopeConfig, EveryRopeGoldensFrequenciesAndScaling) {
  auto files = test::golden_jsons("golden/rope");
  ASSERT_FALSE(files.empty());
  for (const std::string& file : test::golden_jsons("golden/gpt-oss")) files.push_back(file);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const json g = json::parse(read_file(file));
    const json& check = g["rope_check"];
    json config = model_config(g["model"].get<std::string>());
    config.erase("quantization_config");
    const ModelConfig c = parse_config(config.dump(), "config.json");
    EXPECT_EQ(c.rope_dim(), check["rotary_dim"].get<int64_t>());
    EXPECT_EQ(c.rope.theta, check["rope_theta"].get<double>());
    EXPECT_NEAR(c.rope.attention_factor, check["attention_scaling"].get<double>(), 1e-15);
    if (check.contains("inv_freq_short")) {  // longrope: the factor set follows the sequence length
      const int64_t ctx = check["original_max_position_embeddings"].get<int64_t>();
      EXPECT_EQ(c.rope.original_max_position_embeddings, ctx);
      expect_inv_freq(rope_inv_freq(c, 1), check["inv_freq_short"]);
      expect_inv_freq(rope_inv_freq(c, ctx), check["inv_freq_short"]);
      expect_inv_freq(rope_inv_freq(c, ctx + 1), check["inv_freq_long"]);
    } else {
      for (int64_t len : {int64_t{1}, c.max_position_embeddings, 4 * c.max_position_embeddings})
        expect_inv_freq(rope_inv_freq(c, len), check["inv_freq"]);
    }
  }
}

// The v5 golden's config, rewritten in the 4.x layout, gives the same settings; with rope_parameters
// present, rope_theta and rope_scaling beside it are ignored, as transformers v5 does.
TEST(RopeConfig, RopeParametersReplaceRopeThetaAndRopeScaling) {
  const json v5 = model_config("tiny-llama-ropeparams-f32");
  json v4 = v5;
  json rs = v5["rope_parameters"];
  v4["rope_theta"] = rs["rope_theta"];
  rs.erase("rope_theta");
  v4["rope_scaling"] = rs;
  v4.erase("rope_parameters");
  const ModelConfig a = parse_config(v5.dump(), "config.json"), b = parse_config(v4.dump(), "config.json");
  expect_same_rope(a.rope, b.rope);
  EXPECT_EQ(a.rope.scaling, RopeScaling::Llama3);

  json both = v5;
  both["rope_theta"] = 1234.0;
  both["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_same_rope(parse_config(both.dump(), "config.json").rope, a.rope);
}

// Gemma 3 in v5: one entry per layer type, the sliding layers' replacing rope_local_base_freq.
TEST(RopeConfig, RopeParametersPerLayerType) {
  const json v4 = model_config("tiny-gemma3-bf16");
  json v5 = v4;
  json full = v4["rope_scaling"];
  full["rope_theta"] = v4["rope_theta"];
  v5["rope_parameters"] = {{"full_attention", full},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", v4["rope_local_base_freq"]}}}};
  for (const char* key : {"rope_theta", "rope_scaling", "rope_local_base_freq"}) v5.erase(key);
  const ModelConfig a = parse_config(v4.dump(), "config.json"), b = parse_config(v5.dump(), "config.json");
  expect_same_rope(a.rope, b.rope);
  expect_same_rope(a.rope_local, b.rope_local);
  EXPECT_EQ(b.rope.scaling, RopeScaling::Linear);

  v5["rope_parameters"]["sliding_attention"]["rope_theta"] = 5000.0;
  EXPECT_EQ(parse_config(v5.dump(), "config.json").rope_local.theta, 5000.0);

  // A family without local RoPE takes one entry, and refuses two that differ.
  json llama = model_config("tiny-llama-f32");
  llama.erase("rope_theta");
  llama["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  EXPECT_EQ(parse_config(llama.dump(), "config.json").rope.theta, 20000.0);
  llama["rope_parameters"]["sliding_attention"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  EXPECT_MENTIONS(config_error(llama), "rope_parameters.sliding_attention");
}

// YaRN's optional keys as transformers reads them, and Phi-3's older names of longrope.
TEST(RopeConfig, YarnOptionsAndLongRopeAliases) {
  json q = model_config("tiny-qwen3-yarn-bf16");
  const ModelConfig yarn = parse_config(q.dump(), "config.json");
  EXPECT_EQ(yarn.rope.beta_fast, 32.0);
  EXPECT_EQ(yarn.rope.beta_slow, 1.0);
  EXPECT_TRUE(yarn.rope.truncate);
  q["rope_scaling"]["truncate"] = false;  // the ramp's ends stay fractional: other frequencies
  EXPECT_NE(rope_inv_freq(parse_config(q.dump(), "config.json"), 1), rope_inv_freq(yarn, 1));
  q["rope_scaling"]["mscale"] = 1.0;
  q["rope_scaling"]["mscale_all_dim"] = 1.0;  // DeepSeek's: the two cancel
  EXPECT_DOUBLE_EQ(parse_config(q.dump(), "config.json").rope.attention_factor, 1.0);
  q["rope_scaling"]["attention_factor"] = 0.5;  // given: used as it is
  EXPECT_EQ(parse_config(q.dump(), "config.json").rope.attention_factor, 0.5);

  json phi = model_config("tiny-phi3-longrope-bf16");
  const RopeConfig longrope = parse_config(phi.dump(), "config.json").rope;
  for (const char* alias : {"su", "yarn"}) {
    phi["rope_scaling"]["type"] = alias;  // transformers' Phi3Config reads both as longrope
    expect_same_rope(parse_config(phi.dump(), "config.json").rope, longrope);
  }
}

TEST(RopeConfig, BadValuesNameTheKey) {
  json q = model_config("tiny-qwen3-yarn-bf16");
  q["rope_scaling"]["beta_fast"] = "fast";
  EXPECT_MENTIONS(config_error(q), "rope_scaling.beta_fast must be a number");
  q = model_config("tiny-qwen3-yarn-bf16");
  q["rope_scaling"]["truncate"] = 1;
  EXPECT_MENTIONS(config_error(q), "rope_scaling.truncate");
  q["rope_scaling"].erase("truncate");
  q["rope_scaling"].erase("factor");
  q["rope_scaling"].erase("original_max_position_embeddings");
  EXPECT_MENTIONS(config_error(q), "rope_scaling.factor");
  q["rope_scaling"] = {{"rope_type", "mrope"}};
  EXPECT_MENTIONS(config_error(q), "mrope");

  json phi = model_config("tiny-phi3-longrope-bf16");
  phi["rope_scaling"]["short_factor"] = {1.0, 1.0};  // 9 rotary frequencies
  std::string e = config_error(phi);
  EXPECT_MENTIONS(e, "rope_scaling.short_factor");
  EXPECT_MENTIONS(e, "9");
  phi = model_config("tiny-phi3-longrope-bf16");
  phi["rope_scaling"].erase("long_factor");
  EXPECT_MENTIONS(config_error(phi), "rope_scaling.long_factor");

  json v5 = model_config("tiny-llama-ropeparams-f32");
  v5["rope_parameters"]["rope_theta"] = "big";
  EXPECT_MENTIONS(config_error(v5), "rope_parameters.rope_theta must be a number");
  v5["rope_parameters"] = 3;
  EXPECT_MENTIONS(config_error(v5), "rope_parameters");
}

}  // namespace
}  // namespace ember::model
