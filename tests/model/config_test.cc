#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using nlohmann::json;

json base_config() { return json::parse(read_file(test::model_dir("story-656k") + "/config.json")); }

std::string error_of(const json& j) {
  try {
    parse_config(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Config, ParsesSharedModels) {
  const ModelConfig c = load_config(test::model_dir("chat-skills"));
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.num_key_value_heads, 4);
  const ModelConfig q = load_config(test::model_dir("tiny-qwen2-bf16"));
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.o_bias);
  EXPECT_FALSE(q.any_sliding_window());  // use_sliding_window is false
  EXPECT_TRUE(load_config(test::model_dir("tiny-qwen3-bf16")).qk_norm);
  const ModelConfig m = load_config(test::model_dir("tiny-mistral-f16"));
  ASSERT_EQ(static_cast<int64_t>(m.layers.size()), m.num_hidden_layers);
  for (const LayerSpec& l : m.layers) EXPECT_GT(l.sliding_window, 0);
  EXPECT_EQ(load_config(test::model_dir("tiny-llama3-bf16")).rope.scaling, RopeScaling::Llama3);
}

TEST(Config, PerLayerSlidingWindow) {
  json j = json::parse(read_file(test::model_dir("tiny-qwen2-bf16") + "/config.json"));
  j["num_hidden_layers"] = 3;
  j["sliding_window"] = 8;
  j["max_window_layers"] = 1;
  EXPECT_FALSE(parse_config(j.dump(), "config.json").any_sliding_window());  // without use_sliding_window
  j["use_sliding_window"] = true;
  ModelConfig c = parse_config(j.dump(), "config.json");  // transformers: layers >= max_window_layers
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.layers[0].sliding_window, 0);
  EXPECT_EQ(c.layers[1].sliding_window, 8);
  EXPECT_EQ(c.layers[2].sliding_window, 8);
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};  // given: it rules
  c = parse_config(j.dump(), "config.json");
  EXPECT_EQ(c.layers[0].sliding_window, 8);
  EXPECT_EQ(c.layers[1].sliding_window, 0);
  EXPECT_EQ(c.layers[2].sliding_window, 8);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("layer_types[1]"), std::string::npos) << error_of(j);
}

TEST(Config, AttentionBiasPerArchitecture) {
  json j = base_config();  // llama: attention_bias covers q, k, v and o
  j["attention_bias"] = true;
  ModelConfig c = parse_config(j.dump(), "config.json");
  EXPECT_TRUE(c.qkv_bias && c.o_bias);
  j["model_type"] = "mistral";  // transformers' Mistral has no attention biases
  c = parse_config(j.dump(), "config.json");
  EXPECT_FALSE(c.qkv_bias || c.o_bias);
  j["model_type"] = "qwen2";  // q, k, v always, o never
  j["attention_bias"] = false;
  c = parse_config(j.dump(), "config.json");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
}

TEST(Config, MissingFieldIsNamed) {
  json j = base_config();
  j.erase("hidden_size");
  const std::string e = error_of(j);
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden_size"), std::string::npos) << e;
}

// A RoPE base that is not positive or a negative norm epsilon loaded, and every logit came out NaN
// ("sampler: no token has a finite logit"); now the field is named at load. An epsilon of 0 is allowed.
TEST(Config, NormEpsilonAndRopeThetaOutOfRangeAreNamed) {
  for (const auto& [field, value, says] : std::vector<std::tuple<std::string, double, std::string>>{
           {"rope_theta", 0, "field \"rope_theta\" must be positive (got 0)"},
           {"rope_theta", -10000, "field \"rope_theta\" must be positive (got -10000)"},
           {"rms_norm_eps", -1e-5, "field \"rms_norm_eps\" must not be negative (got -1e-05)"}}) {
    json j = base_config();
    j[field] = value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find("config.json: " + says), std::string::npos) << e;
  }
  json j = base_config();
  j["rms_norm_eps"] = 0;
  EXPECT_EQ(error_of(j), "(no error)");
}

// A model_type that is not a string is said to be one (it was reported missing).
TEST(Config, ModelTypeNotAStringIsSaidSo) {
  json j = base_config();
  j["model_type"] = 5;
  EXPECT_EQ(error_of(j), "config.json: field \"model_type\" must be a string (got 5)");
  j.erase("model_type");
  EXPECT_EQ(error_of(j), "config.json: missing required field \"model_type\"");
}

TEST(Config, UnknownModelTypeListsSupported) {
  json j = base_config();
  j["model_type"] = "gpt_neox";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("gpt_neox"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen3"), std::string::npos) << e;
}

TEST(Config, DimensionsBeyondTheLimitsAreNamed) {
  // Each would overflow a size computed from it (or ask for a vector of that many layers).
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "vocab_size", "max_position_embeddings"}) {
    json j = base_config();
    j[key] = int64_t{1} << 62;
    if (std::string(key) == "num_attention_heads") {
      j["num_key_value_heads"] = int64_t{1} << 62;
      j["head_dim"] = 16;
    }
    const std::string e = error_of(j);
    EXPECT_NE(e.find(key), std::string::npos) << e;
    EXPECT_NE(e.find("limit"), std::string::npos) << e;
  }
  json j = base_config();  // each factor within the limit, the product not
  j["num_attention_heads"] = 1 << 16;
  j["num_key_value_heads"] = 1 << 16;
  j["head_dim"] = 1 << 16;
  EXPECT_NE(error_of(j).find("num_attention_heads x head_dim"), std::string::npos) << error_of(j);
}

TEST(Config, UnsupportedOptionsAreNamed) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "mrope"}, {"factor", 4.0}};
  EXPECT_NE(error_of(j).find("mrope"), std::string::npos);
  j = base_config();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("gelu"), std::string::npos);
  j = base_config();
  j["num_attention_heads"] = "eight";
  EXPECT_NE(error_of(j).find("num_attention_heads"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("object"), std::string::npos);
}

TEST(Config, RopeScalingVariants) {
  ModelConfig c;
  c.head_dim = 8;
  c.max_position_embeddings = 100;
  c.rope.theta = 10000;
  const auto plain = rope_inv_freq(c, 10);
  EXPECT_DOUBLE_EQ(plain[0], 1.0);
  EXPECT_NEAR(plain[1], std::pow(10000.0, -0.25), 1e-15);
  c.rope.scaling = RopeScaling::Linear;
  c.rope.factor = 4;
  EXPECT_DOUBLE_EQ(rope_inv_freq(c, 10)[1], plain[1] / 4);
  c.rope.scaling = RopeScaling::Dynamic;
  c.rope.factor = 2;
  EXPECT_DOUBLE_EQ(rope_inv_freq(c, 50)[1], plain[1]);  // within the trained length: unchanged
  EXPECT_LT(rope_inv_freq(c, 400)[1], plain[1]);
}

}  // namespace
}  // namespace ember::model
