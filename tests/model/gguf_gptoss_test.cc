// -m FILE.gguf for llama.cpp's arch gpt-oss: each file of every expectation in
// ../shared/testdata/gguf/gpt-oss/ loads with its MXFP4 experts kept as stored, reads the config its
// source folder's config.json gives (YaRN, the even layers' window, sinks, biases, the clamped
// SwiGLU), and gives its golden logits within the float tolerance (MXFP4 products take unrounded
// activations: kernels/matmul.cc) with greedy_short_16 decoded freely.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gguf_fixtures.h"
#include "gguf_golden.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_config.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

using nlohmann::json;

class GgufGptOss : public ::testing::TestWithParam<test::GgufCase> {};

TEST_P(GgufGptOss, MatchesItsGoldenWithinTheFloatTolerance) {
  const test::GgufCase& p = GetParam();
  const json e = test::read_json(p.expectation);
  json f = e["files"][p.file];
  const std::string path = test::gguf_path(p.file);
  if (f.contains("dequantized_rows")) {
    EXPECT_GT(test::check_dequantized_rows(GgufFile(path), f), 0u);
  }
  auto m = Model::load(path, {.threads = 2, .progress = {}});
  EXPECT_EQ(m->load_note(), "");  // every tensor held as stored
  EXPECT_NE(m->weight_type().find("mxfp4"), std::string::npos) << m->weight_type();
  f["tensor_types"] = json::array({"F32"});  // the float tolerance, not llama.cpp's int8 activations'
  const test::GoldenResult r = test::run_golden(*m, e, f, test::Greedy::kExact);
  std::printf("%-30s %.2f of the float tolerance\n", p.file.c_str(), r.worst_ratio());
  test::expect_golden(r);
}

// The file's metadata read as the source folder's config.json is.
TEST_P(GgufGptOss, ConfigEqualsTheSourceFolders) {
  const test::GgufCase& p = GetParam();
  const json e = test::read_json(p.expectation);
  const ModelConfig g = gguf_config(GgufFile(test::gguf_path(p.file)));
  const ModelConfig h = load_config(test::model_dir(e["source_hf_folder"].get<std::string>()));
  EXPECT_EQ(g.model_type, "gpt_oss");
  ASSERT_EQ(g.layers.size(), h.layers.size());
  for (size_t l = 0; l < g.layers.size(); ++l) {
    EXPECT_EQ(g.layers[l].sliding_window, h.layers[l].sliding_window) << l;
    EXPECT_EQ(g.layers[l].sparse_mlp, h.layers[l].sparse_mlp) << l;
  }
  EXPECT_EQ(g.head_dim, h.head_dim);
  EXPECT_EQ(g.num_key_value_heads, h.num_key_value_heads);
  EXPECT_TRUE(g.attention_sinks && g.qkv_bias && g.o_bias);
  EXPECT_EQ(g.moe.num_experts, h.moe.num_experts);
  EXPECT_EQ(g.moe.experts_per_tok, h.moe.experts_per_tok);
  EXPECT_EQ(g.moe.intermediate_size, h.moe.intermediate_size);
  EXPECT_EQ(g.moe.biases, h.moe.biases);
  EXPECT_EQ(g.moe.swiglu_limit, h.moe.swiglu_limit);
  EXPECT_EQ(g.moe.renormalize, h.moe.renormalize);
  EXPECT_EQ(g.rope.scaling, RopeScaling::Yarn);
  EXPECT_EQ(g.rope.theta, h.rope.theta);
}

INSTANTIATE_TEST_SUITE_P(Files, GgufGptOss, ::testing::ValuesIn(test::gguf_cases("gguf/gpt-oss")), test::gguf_case_name);

TEST(GgufGptOssFolder, HasFiles) { EXPECT_FALSE(test::gguf_cases("gguf/gpt-oss").empty()); }

}  // namespace
}  // namespace ember::model
