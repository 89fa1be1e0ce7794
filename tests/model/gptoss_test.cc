// gpt-oss's options beyond its golden: how config.json becomes layers and experts, the values that
// are refused (each named), and the MXFP4 folder refused by its quantization_config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config_testing.h"
#include "error_of.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using nlohmann::json;
using test::config_error;
using test::model_config;

TEST(GptOss, ConfigBecomesLayersExpertsAndSinks) {
  const json j = model_config("tiny-gptoss-bf16");
  const ModelConfig c = parse_config(j.dump(), "config.json");
  ASSERT_EQ(c.layers.size(), j["layer_types"].size());
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const bool sliding = j["layer_types"][l] == "sliding_attention";
    EXPECT_EQ(c.layers[l].sliding_window, sliding ? j["sliding_window"].get<int64_t>() : 0) << l;
    EXPECT_TRUE(c.layers[l].sparse_mlp) << l;
  }
  EXPECT_TRUE(c.attention_sinks && c.qkv_bias && c.o_bias && c.moe.biases && c.moe.renormalize);
  EXPECT_EQ(c.moe.num_experts, j["num_local_experts"].get<int64_t>());
  EXPECT_EQ(c.moe.experts_per_tok, j["experts_per_token"].get<int64_t>());
  EXPECT_EQ(c.moe.swiglu_limit, j["swiglu_limit"].get<double>());
  EXPECT_EQ(c.rope.scaling, RopeScaling::Yarn);
  EXPECT_FALSE(c.rope.truncate);

  // Without layer_types, transformers' default: the even layers slide.
  json bare = j;
  bare.erase("layer_types");
  const ModelConfig d = parse_config(bare.dump(), "config.json");
  for (size_t l = 0; l < d.layers.size(); ++l) EXPECT_EQ(d.layers[l].sliding_window > 0, l % 2 == 0) << l;

  // OpenAI's experts_per_token alone is read as num_experts_per_tok.
  json openai = j;
  openai.erase("num_experts_per_tok");
  openai["experts_per_token"] = 2;
  EXPECT_EQ(parse_config(openai.dump(), "config.json").moe.experts_per_tok, 2);
}

TEST(GptOssErrors, BadValuesAreNamed) {
  const json j = model_config("tiny-gptoss-bf16");
  json k = j;
  k["experts_per_token"] = 3;
  const std::string disagree = config_error(k);
  EXPECT_MENTIONS(disagree, "experts_per_token");
  EXPECT_MENTIONS(disagree, "num_experts_per_tok");
  for (const json& limit : {json(0), json(-1.5), json("7")}) {
    json bad = j;
    bad["swiglu_limit"] = limit;
    EXPECT_MENTIONS(config_error(bad), "swiglu_limit");
  }
  json types = j;
  types["layer_types"][1] = "chunked_attention";
  EXPECT_MENTIONS(config_error(types), "layer_types[1]");
  json too_many = j;
  too_many["num_experts_per_tok"] = too_many["experts_per_token"] = 9;
  EXPECT_MENTIONS(config_error(too_many), "num_experts_per_tok");
}

std::vector<float> last_logits(const LoadOptions& options) {
  auto m = Model::load(test::model_dir("tiny-gptoss-bf16"), options);
  auto cache = m->make_cache(64);
  KvSequence seq(*cache);
  const std::vector<int32_t> prompt = {1, 400, 20, 300, 77, 5, 1000, 9, 31, 64, 2000, 7};  // past the window of 8
  return m->forward(seq, prompt);
}

// The experts split from the fused tensors are copies of their own: converted to F32 (which loses
// nothing of BF16) they give the stored model's logits, and quantized to Q8_0 logits close to them.
TEST(GptOss, SplitExpertsConvertAndQuantize) {
  const std::vector<float> want = last_logits({.threads = 2, .progress = {}});
  const std::vector<float> f32 = last_logits({.threads = 2, .progress = {}, .weight_dtype = DType::F32});
  const std::vector<float> q8 = last_logits({.threads = 2, .progress = {}, .quantize = kernels::QType::Q8_0});
  ASSERT_EQ(f32.size(), want.size());
  ASSERT_EQ(q8.size(), want.size());
  double f32_err = 0, mq = 0, mw = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    f32_err = std::max(f32_err, static_cast<double>(std::fabs(f32[i] - want[i])));
    mq += q8[i] / static_cast<double>(want.size());
    mw += want[i] / static_cast<double>(want.size());
  }
  EXPECT_LT(f32_err, 1e-3);
  // The correlation of the centred logits, as Families.QuantizedPathsRun: a wrong split leaves
  // logits unrelated to the stored model's; rounding (which can flip a router's choice) lowers it a little.
  double qw = 0, qq = 0, ww = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    qw += (q8[i] - mq) * (want[i] - mw);
    qq += (q8[i] - mq) * (q8[i] - mq);
    ww += (want[i] - mw) * (want[i] - mw);
  }
  EXPECT_GT(qw / std::sqrt(qq * ww), 0.99);
}

// The published gpt-oss folders store their experts as MXFP4 blocks and scales: refused by name
// until Ember has kernels for them, rather than failing on a missing tensor.
TEST(GptOssErrors, Mxfp4FolderIsRefusedByItsQuantizationConfig) {
  const std::string e = test::error_of([] { Model::load(test::model_dir("tiny-gptoss-mxfp4")); });
  EXPECT_MENTIONS(e, "quantization_config");
  EXPECT_MENTIONS(e, "mxfp4");
}

}  // namespace
}  // namespace ember::model
