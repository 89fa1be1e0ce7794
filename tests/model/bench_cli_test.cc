// ember bench on a model folder: the reported dtype comes from the tensors as held in memory, the
// KV bytes follow --kv-dtype, and a float --dtype is refused for a folder (it applies to --synthetic).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "test_paths.h"

namespace ember::model {
namespace {

nlohmann::json bench(const std::string& flags) {
  const test::Output o = test::run_command("'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") +
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
  const test::Output bad = test::run_command("'" + test::ember_binary() + "' bench -m '" + test::model_dir("story-656k") +
                                             "' --dtype bf16 -p 8 -n 2 --reps 1 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--synthetic"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace ember::model
