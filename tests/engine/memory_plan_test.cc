// The memory plan: the context per sequence is the smallest of the trained context, --ctx and what
// fits the budget for all planned sequences; too little memory is a clear error with the numbers.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/format.h"
#include "base/mapped_file.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "run_command.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

constexpr int64_t kGB = 1000 * 1000 * 1000;

TEST(MemoryPlan, ContextIsTheSmallestOfTrainedRequestedAndWhatFits) {
  // Llama-3.2-1B's cache in F16: 16 layers x 8 KV heads x 64 x 2 x 2 bytes = 32 KiB per token.
  const int64_t per_token = 16 * 8 * 64 * 2 * 2;
  MemoryRequest r;
  r.sequences = 8;
  r.pool_factor = 2;
  MemoryPlan p = plan_memory(131072, per_token, 2 * kGB, kernels::KvType::F16, 10 * kGB, r);
  EXPECT_EQ(p.budget_bytes, static_cast<int64_t>(kAvailableShare * 10 * kGB));
  EXPECT_EQ(p.context, p.budget_bytes / (per_token * 8 * 2));  // 8 GB hold far less than 131072 x 16
  EXPECT_LE(p.kv_bytes(), p.budget_bytes);  // the whole pool, both halves
  EXPECT_GT(p.kv_bytes(), p.budget_bytes - per_token * 8 * 2);
  r.context = 4096;
  EXPECT_EQ(plan_memory(131072, per_token, 2 * kGB, kernels::KvType::F16, 10 * kGB, r).context, 4096);
  r.context = 0;
  r.sequences = 1;
  r.pool_factor = 1;
  EXPECT_EQ(plan_memory(2048, per_token, 2 * kGB, kernels::KvType::F16, 10 * kGB, r).context, 2048);  // trained context
  r.budget_bytes = 64 * 1024 * 1024;  // --mem 64M: 2048 tokens of 32 KiB
  EXPECT_EQ(plan_memory(131072, per_token, 2 * kGB, kernels::KvType::F16, 10 * kGB, r).context, 2048);
  EXPECT_NE(p.describe().find("8 sequences"), std::string::npos) << p.describe();
}

TEST(MemoryPlan, TooLittleMemoryNamesTheNumbers) {
  MemoryRequest r;
  r.budget_bytes = 1024 * 1024;  // 1 MiB for 256 tokens of 32 KiB
  try {
    plan_memory(131072, 32768, kGB, kernels::KvType::F16, 10 * kGB, r);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("not enough memory"), std::string::npos) << m;
    EXPECT_NE(m.find("--mem"), std::string::npos) << m;
    EXPECT_NE(m.find("256 tokens"), std::string::npos) << m;
  }
}

TEST(MemoryPlan, CommandsPrintThePlanAndRefuseTooLittle) {
  const std::string chat = test::ember_binary() + " chat -m " + test::model_dir("chat-skills");
  const test::Output ok = test::run_command("echo 'Hello!' | " + chat + " --no-think 2>&1");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("memory plan: KV cache"), std::string::npos) << ok.out;
  const test::Output tiny = test::run_command("echo 'Hello!' | " + chat + " --mem 4K 2>&1");
  ASSERT_TRUE(WIFEXITED(tiny.status)) << tiny.out;
  EXPECT_EQ(WEXITSTATUS(tiny.status), 1) << tiny.out;
  EXPECT_NE(tiny.out.find("not enough memory for the KV cache"), std::string::npos) << tiny.out;
  const test::Output bad = test::run_command(chat + " --mem lots 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--mem"), std::string::npos) << bad.out;
}

// Gemma 4's KV-shared layers store nothing: the plan a command prints counts the keys and values of
// the layers that compute them (by each golden's layer_plan), not of every layer.
TEST(MemoryPlan, GemmaFourCountsOnlyTheLayersThatStoreKeys) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(test::testdata("golden/gemma4")))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  bool any_shared = false;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const nlohmann::json g = nlohmann::json::parse(read_file(file));
    int64_t stored = 0;
    for (const auto& p : g["layer_plan"])
      if (!p["kv_shared"].get<bool>()) stored += 2 * p["kv_heads"].get<int64_t>() * p["head_dim"].get<int64_t>() * 4;
      else any_shared = true;
    const std::string dir = test::model_dir(g["model"].get<std::string>());
    EXPECT_EQ(model::KvCache::bytes_per_token(model::load_config(dir), kernels::KvType::F32), stored);
    const test::Output o = test::run_command(test::ember_binary() + " generate -m " + dir +
                                             " -p 'Once upon a time' -n 1 --kv-dtype f32 2>&1");
    ASSERT_EQ(o.status, 0) << o.out;
    EXPECT_NE(o.out.find(" at full use, " + format_bytes(static_cast<double>(stored)) + " per token)"), std::string::npos)
        << "want " << format_bytes(static_cast<double>(stored)) << " per token: " << o.out;
  }
  EXPECT_TRUE(any_shared) << "no golden in golden/gemma4 shares keys across layers";
}

// A hybrid's recurrent state is a fixed size per sequence (with its snapshots): it comes off the
// budget before the context is sized, and the plan's line states it.
TEST(MemoryPlan, HybridStateBytesPerSequence) {
  const model::ModelConfig c = model::load_config(test::model_dir("tiny-qwen35-bf16"));
  const int64_t state = model::KvCache::state_bytes_with_snapshots(c);
  ASSERT_GT(state, 0);
  EXPECT_EQ(model::KvCache::state_bytes_with_snapshots(model::load_config(test::model_dir("tiny-qwen3-bf16"))), 0);
  const int64_t per_token = model::KvCache::bytes_per_token(c, kernels::KvType::F16);
  MemoryRequest r;
  r.sequences = 4;
  r.pool_factor = 2;
  r.budget_bytes = 8 * state + 1000 * 8 * per_token;
  const MemoryPlan p = plan_memory(c.max_position_embeddings, per_token, kGB, kernels::KvType::F16, 10 * kGB, r, state);
  EXPECT_EQ(p.state_bytes(), 8 * state);
  EXPECT_EQ(p.context, 1000);
  EXPECT_NE(p.describe().find("recurrent state"), std::string::npos) << p.describe();
  EXPECT_EQ(plan_memory(c.max_position_embeddings, per_token, kGB, kernels::KvType::F16, 10 * kGB, r).describe().find("recurrent"),
            std::string::npos);
}

}  // namespace
}  // namespace ember::engine
