// ember bench on a model folder: the reported dtype comes from the tensors as held in memory, the
// KV bytes follow --kv-dtype, a float --dtype converts a folder's matrices at load, an unknown one
// is refused, --act-dtype is stated, and an unmeasured warm-up runs first unless --no-warmup.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "run_command.h"
#include "test_paths.h"

namespace ember::model {
namespace {

nlohmann::json bench(const std::string& flags, const std::string& model = "story-656k") {
  const test::Output o = test::run_command("'" + test::ember_binary() + "' bench -m '" + test::model_dir(model) +
                                           "' -p 8 -n 2 --reps 1 --json " + flags + " 2>/dev/null");
  EXPECT_EQ(o.status, 0) << o.out;
  return nlohmann::json::parse(o.out);
}

TEST(BenchCli, LabelsTheDtypeHeldInMemory) {
  const nlohmann::json f32 = bench("--kv-dtype f32"), q8 = bench("--dtype q8_0 --kv-dtype f32"), kv16 = bench("");
  EXPECT_EQ(f32["dtype"], "f32");  // story-656k is stored in float32
  EXPECT_EQ(q8["dtype"], "q8_0");
  EXPECT_LT(q8["decode_bytes_per_token"].get<double>(), f32["decode_bytes_per_token"].get<double>() / 3);
  EXPECT_EQ(kv16["kv_dtype"], "f16");  // the default, as llama-bench's
  EXPECT_LT(kv16["decode_bytes_per_token"].get<double>(), f32["decode_bytes_per_token"].get<double>());
  EXPECT_GT(f32["read_bandwidth_gb_s"].get<double>(), 0.0);
  EXPECT_GT(f32["peak_rss_mib"].get<double>(), 0.0);
  for (const char* half : {"bf16", "f16"}) {  // 2 bytes a weight where float32 has 4
    const nlohmann::json h = bench(std::string("--dtype ") + half + " --kv-dtype f32");
    EXPECT_EQ(h["dtype"], half);
    EXPECT_LT(h["decode_bytes_per_token"].get<double>(), f32["decode_bytes_per_token"].get<double>() * 0.6);
    EXPECT_GT(h["decode_bytes_per_token"].get<double>(), q8["decode_bytes_per_token"].get<double>());
  }
  const test::Output bad = test::run_command("'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") +
                                             "' --dtype f8 -p 8 -n 2 --reps 1 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--dtype: f8 not in {f32,f16,bf16,q8_0,q4_0,q4_k,q4_k_m,q5_k_m}"), std::string::npos) << bad.out;  // at parse time
}

// --act-dtype bf16 (bench, and every command that loads a model): BF16 matrices take BF16-rounded
// activations, which the JSON states; a model without BF16 matrices is refused by name, and an
// unknown value at parse time.
TEST(BenchCli, ActivationDtype) {
  EXPECT_EQ(bench("--dtype bf16")["act_dtype"], "f32");
  EXPECT_EQ(bench("--dtype bf16 --act-dtype bf16")["act_dtype"], "bf16");
  const std::string run = "'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") + "' -p 8 -n 2 --reps 1";
  const test::Output f32 = test::run_command(run + " --act-dtype bf16 2>&1");  // story-656k is float32
  EXPECT_NE(f32.status, 0);
  EXPECT_NE(f32.out.find("BF16 activations are for BF16 weight matrices, and this model has none (its matrices: f32"),
            std::string::npos) << f32.out;
  const test::Output bad = test::run_command(run + " --act-dtype f8 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--act-dtype: f8 not in {f32,bf16}"), std::string::npos) << bad.out;
  const test::Output gen = test::run_command("'" + test::ember_binary() + "' generate -m '" + test::model_dir("chat-skills") +
                                             "' -p Hello -n 4 --act-dtype bf16 2>&1");
  EXPECT_EQ(gen.status, 0) << gen.out;
  EXPECT_NE(gen.out.find("activations rounded to BF16 for "), std::string::npos) << gen.out;
}

// Each repetition's roofline is the bandwidth measured beside it: a probe after the warm-up and after
// each repetition, a repetition's the larger of the two around it; the fraction reported is the
// median of the repetitions' own, the bandwidth the median of their rooflines.
TEST(BenchCli, EachRepetitionMeetsTheBandwidthMeasuredBesideIt) {
  const test::Output o = test::run_command("'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") +
                                           "' -p 8 -n 4 --reps 3 --json 2>/dev/null");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  const auto probes = j["read_bandwidth_probes_gb_s"].get<std::vector<double>>();
  const auto decode = j["decode_tok_s"].get<std::vector<double>>();
  const auto fractions = j["decode_roofline_fractions"].get<std::vector<double>>();
  ASSERT_EQ(probes.size(), 4u);
  ASSERT_EQ(fractions.size(), 3u);
  std::vector<double> bw;
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_GT(probes[r], 0.0);
    bw.push_back(std::max(probes[r], probes[r + 1]));
    const double want = decode[r] * j["decode_bytes_per_token"].get<double>() / (bw.back() * 1e9);
    EXPECT_NEAR(fractions[r], want, 1e-9 * want) << "rep " << r;
  }
  std::vector<double> f = fractions;
  std::sort(f.begin(), f.end());
  std::sort(bw.begin(), bw.end());
  EXPECT_DOUBLE_EQ(j["decode_roofline_fraction"].get<double>(), f[1]);
  EXPECT_NEAR(j["read_bandwidth_gb_s"].get<double>(), bw[1], 1e-12 * bw[1]);
  EXPECT_NEAR(j["decode_roofline_tok_s"].get<double>(), bw[1] * 1e9 / j["decode_bytes_per_token"].get<double>(),
              1e-9 * j["decode_roofline_tok_s"].get<double>());
}

// Before its repetitions bench runs one unmeasured prompt and a few decode steps, as llama-bench
// does (--no-warmup: none), and says so.
TEST(BenchCli, WarmsUpUnlessTold) {
  EXPECT_EQ(bench("")["warmup"], true);
  EXPECT_EQ(bench("--no-warmup")["warmup"], false);
  const std::string run = "'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") + "' -p 8 -n 2 --reps 1";
  const test::Output warm = test::run_command(run + " 2>&1"), cold = test::run_command(run + " --no-warmup 2>&1");
  ASSERT_EQ(warm.status, 0) << warm.out;
  ASSERT_EQ(cold.status, 0) << cold.out;
  EXPECT_NE(warm.out.find("warm-up: prefill 8 tokens, decode 2"), std::string::npos) << warm.out;
  EXPECT_EQ(cold.out.find("warm-up"), std::string::npos) << cold.out;
}

// A mixture of experts: the bytes per token are those of the experts a token reads.
TEST(BenchCli, MixtureOfExpertsStatesTheExpertsRead) {
  const nlohmann::json cfg = nlohmann::json::parse(read_file(test::model_dir("tiny-qwen3moe-bf16") + "/config.json"));
  const nlohmann::json moe = bench("", "tiny-qwen3moe-bf16"), dense = bench("");
  EXPECT_EQ(moe["experts"], cfg["num_experts"]);
  EXPECT_EQ(moe["experts_per_token"], cfg["num_experts_per_tok"]);
  EXPECT_EQ(dense["experts"], 0);
  const auto m = Model::load(test::model_dir("tiny-qwen3moe-bf16"), {.threads = 1, .progress = {}});
  EXPECT_GE(moe["decode_bytes_per_token"].get<double>(), static_cast<double>(m->decode_weight_bytes()));
  EXPECT_GT(moe["decode_roofline_tok_s"].get<double>(), 0.0);
}

// Gemma 4's synthetic shapes: the bytes a decode step reads are the weights (the per-layer embeddings'
// table row included) and the KV cache as each layer reads it, where a layer sharing another's keys
// reads them again though the cache holds them once. (The CLI runs the E2B shape only: the
// 26B-A4B one holds 3 billion expert weights.)
TEST(BenchCli, GemmaFourShapesCountSharedKeysAsRead) {
  auto kv = [](const ModelConfig& c, bool stored_only) {
    int64_t bytes = 0;
    for (size_t l = 0; l < c.layers.size(); ++l)
      if (!stored_only || c.layers[l].kv_source < 0) bytes += 2 * c.kv_heads_of(l) * c.head_dim_of(l) * 4;  // f32
    return bytes;
  };
  const ModelConfig e2b = synthetic_config("gemma-4-e2b-4l"), moe = synthetic_config("gemma-4-26b-a4b-4l");
  EXPECT_GT(e2b.per_layer_input, 0);
  EXPECT_LT(kv(e2b, true), kv(e2b, false));  // two of its layers read the others' keys
  EXPECT_GT(moe.moe.num_experts, 0);
  for (const ModelConfig* c : {&e2b, &moe}) {
    EXPECT_EQ(KvCache::bytes_per_token(*c, kernels::KvType::F32), kv(*c, true));
    EXPECT_DOUBLE_EQ(KvCache::bytes_read_per_token(*c, kernels::KvType::F32, 9.0), 9.0 * static_cast<double>(kv(*c, false)));
  }
  const test::Output o = test::run_command("'" + test::ember_binary() +
                                           "' bench --synthetic gemma-4-e2b-4l -p 8 -n 2 --reps 1 --no-warmup --kv-dtype f32 --json 2>/dev/null");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["kv_cache_bytes_per_position"].get<int64_t>(), kv(e2b, true));
  EXPECT_DOUBLE_EQ(j["decode_kv_bytes_per_token"].get<double>(), 9.0 * static_cast<double>(kv(e2b, false)));  // 8 + 2/2
  EXPECT_GT(j["decode_bytes_per_token"].get<double>(), j["decode_kv_bytes_per_token"].get<double>());
  EXPECT_GT(j["decode_tok_s_median"].get<double>(), 0.0);
}

// gpt-oss-20b's shape at 2 layers with MXFP4 experts: a decode step reads the chosen experts at the
// file's 17 bytes per 32 weights (4 of 32 per layer), which the JSON states.
TEST(BenchCli, GptOssShapeReadsTheChosenMxfp4Experts) {
  const ModelConfig c = synthetic_config("gpt-oss-20b-2l");
  EXPECT_TRUE(c.moe.mxfp4 && c.attention_sinks);
  const test::Output o = test::run_command("'" + test::ember_binary() +
                                           "' bench --synthetic gpt-oss-20b-2l -p 4 -n 2 --reps 1 --no-warmup --json 2>/dev/null");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["experts"], c.moe.num_experts);
  EXPECT_EQ(j["experts_per_token"], c.moe.experts_per_tok);
  const int64_t H = c.hidden_size, I = c.moe.intermediate_size;
  const int64_t experts_read = static_cast<int64_t>(c.layers.size()) * c.moe.experts_per_tok * 3 * H * I * 17 / 32;
  EXPECT_GT(j["decode_bytes_per_token"].get<double>(), static_cast<double>(experts_read));
  EXPECT_GT(j["decode_tok_s_median"].get<double>(), 0.0);
}

}  // namespace
}  // namespace ember::model
