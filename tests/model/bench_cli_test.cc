// ember bench on a model folder: the reported dtype comes from the tensors as held in memory, the
// KV bytes follow --kv-dtype, a float --dtype converts a folder's matrices at load, an unknown one
// is refused, and an unmeasured warm-up runs first unless --no-warmup.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/mapped_file.h"
#include "model/model.h"
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
  EXPECT_NE(bad.out.find("--dtype: f8 not in {f32,f16,bf16,q8_0,q4_0,q4_k}"), std::string::npos) << bad.out;  // at parse time
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

}  // namespace
}  // namespace ember::model
