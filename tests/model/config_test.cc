#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

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
  EXPECT_TRUE(q.attention_bias);
  EXPECT_EQ(q.sliding_window, 0);  // use_sliding_window is false
  EXPECT_TRUE(load_config(test::model_dir("tiny-qwen3-bf16")).qk_norm);
  EXPECT_GT(load_config(test::model_dir("tiny-mistral-f16")).sliding_window, 0);
  EXPECT_EQ(load_config(test::model_dir("tiny-llama3-bf16")).rope.scaling, RopeScaling::Llama3);
}

TEST(Config, MissingFieldIsNamed) {
  json j = base_config();
  j.erase("hidden_size");
  const std::string e = error_of(j);
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden_size"), std::string::npos) << e;
}

TEST(Config, UnknownModelTypeListsSupported) {
  json j = base_config();
  j["model_type"] = "gpt_neox";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("gpt_neox"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen3"), std::string::npos) << e;
}

TEST(Config, UnsupportedOptionsAreNamed) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of(j).find("yarn"), std::string::npos);
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
