// gpt-oss's options beyond its golden: how config.json becomes layers and experts, the values that
// are refused (each named), and the MXFP4 experts of the published folders as the kernels keep them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config_testing.h"
#include "error_of.h"
#include "gguf_golden.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/mxfp4_checkpoint.h"
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

// quantization_config: "mxfp4" marks gpt-oss's MXFP4 experts; any other method, or mxfp4 on a family
// whose tensors Ember does not read as MXFP4, is refused by name rather than misread.
TEST(GptOss, Mxfp4QuantizationConfigIsReadAndOthersRefused) {
  const json j = model_config("tiny-gptoss-mxfp4");
  EXPECT_TRUE(parse_config(j.dump(), "config.json").moe.mxfp4);
  EXPECT_FALSE(parse_config(model_config("tiny-gptoss-bf16").dump(), "config.json").moe.mxfp4);
  json gptq = j;
  gptq["quantization_config"]["quant_method"] = "gptq";
  const std::string e = config_error(gptq);
  EXPECT_MENTIONS(e, "quantization_config");
  EXPECT_MENTIONS(e, "gptq");
  json llama = model_config("tiny-llama-f32");
  llama["quantization_config"] = j["quantization_config"];
  EXPECT_MENTIONS(config_error(llama), "mxfp4");
}

// The golden's mxfp4_check: the stored bytes it quotes, and rows of an expert that the checkpoint's
// blocks give once rewritten as ggml's (dequantize_row) and once repacked for the kernels (copy_row):
// both exactly the reference's values.
TEST(GptOss, Mxfp4ExpertRowsDequantizeToTheGoldensValues) {
  const json g = test::read_json(test::testdata("golden/gpt-oss/tiny-gptoss-mxfp4.json"));
  const json& check = g["mxfp4_check"];
  const std::string tensor = check["tensor"];  // "<stem>_blocks / _scales"
  const std::string stem = tensor.substr(0, tensor.find("_blocks"));
  const SafetensorsFile file(test::model_dir("tiny-gptoss-mxfp4") + "/model.safetensors");
  const TensorInfo& blocks = file.tensors().at(stem + "_blocks");
  const TensorInfo& scales = file.tensors().at(stem + "_scales");
  ASSERT_TRUE(blocks.u8 && scales.u8);
  ASSERT_EQ(blocks.shape.size(), 4u);
  const int64_t out = blocks.shape[1], nb = blocks.shape[2], cols = nb * 32;
  const int64_t e = check["expert"].get<int64_t>();
  const auto* b8 = static_cast<const uint8_t*>(blocks.data) + e * out * nb * kMxfp4PairBytes;
  const auto* s8 = static_cast<const uint8_t*>(scales.data) + e * out * nb;
  const auto first8 = check["blocks_row0_first8"].get<std::vector<int>>();
  for (size_t i = 0; i < first8.size(); ++i) EXPECT_EQ(b8[i], first8[i]) << i;
  const auto scales0 = check["scales_row0"].get<std::vector<int>>();
  for (size_t i = 0; i < scales0.size(); ++i) EXPECT_EQ(s8[i], scales0[i]) << i;

  const json& rows = check["rows"];
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<uint8_t> ggml(static_cast<size_t>(n * nb * kMxfp4GgmlBytes));
  for (int64_t r = 0; r < n; ++r)
    mxfp4_row_to_ggml(b8 + r * nb * kMxfp4PairBytes, s8 + r * nb, nb, ggml.data() + r * nb * kMxfp4GgmlBytes);
  kernels::ThreadPool pool(1);
  const kernels::QuantizedMatrix q = kernels::from_ggml_blocks(kernels::GgmlType::MXFP4, ggml.data(), n, cols, pool);
  std::vector<float> deq(static_cast<size_t>(cols)), kept(static_cast<size_t>(cols));
  for (int64_t r = 0; r < n; ++r) {
    const auto want = rows[static_cast<size_t>(r)].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(want.size()), cols);
    kernels::dequantize_row(kernels::GgmlType::MXFP4, ggml.data() + r * nb * kMxfp4GgmlBytes, cols, deq.data());
    kernels::copy_row(q.view(), r, kept.data());
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(deq[static_cast<size_t>(c)], want[static_cast<size_t>(c)]) << r << "," << c;
      EXPECT_EQ(kept[static_cast<size_t>(c)], want[static_cast<size_t>(c)]) << r << "," << c;
    }
  }
}

// Held as stored: each expert matrix takes the file's 17 bytes per 32 weights (against BF16's 64),
// which is all that changes between the two folders' bytes read per token.
TEST(GptOss, Mxfp4ExpertsAreKeptAtTheFilesSize) {
  auto m = Model::load(test::model_dir("tiny-gptoss-mxfp4"), {.threads = 2, .progress = {}});
  auto b = Model::load(test::model_dir("tiny-gptoss-bf16"), {.threads = 2, .progress = {}});
  const ModelConfig& c = m->config();
  const int64_t per_token = c.moe.experts_per_tok * 3 * c.hidden_size * c.moe.intermediate_size;  // gate, up, down
  const auto layers = static_cast<int64_t>(c.layers.size());
  EXPECT_EQ(b->decode_weight_bytes() - m->decode_weight_bytes(), layers * per_token * (64 - 17) / 32);
  EXPECT_NE(m->weight_type().find("mxfp4"), std::string::npos) << m->weight_type();
}

}  // namespace
}  // namespace ember::model
