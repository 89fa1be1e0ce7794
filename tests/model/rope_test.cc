// RoPE angles per sequence: with dynamic NTK scaling past the trained context, a sequence's rotation
// depends on its own length only, so its logits are the same alone or beside a longer sequence; with
// LongRoPE, a sequence whose length crosses the original context is computed again.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::model {
namespace {

namespace fs = std::filesystem;

// story-656k with a trained context of 16 positions and dynamic scaling.
std::string dynamic_rope_folder() {
  const fs::path src = test::model_dir("story-656k");
  const fs::path dir = fs::temp_directory_path() / ("ember-rope-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto config = nlohmann::json::parse(read_file((src / "config.json").string()));
  config["max_position_embeddings"] = 16;
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  std::ofstream(dir / "config.json") << config.dump();
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(src / "model.safetensors", dir / "model.safetensors");
  return dir.string();
}

TEST(Rope, DynamicScalingDependsOnTheSequenceNotItsBatch) {
  const std::string dir = dynamic_rope_folder();
  auto m = Model::load(dir, {.threads = 2, .progress = {}});
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> a(24), b(40);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(1 + (i * 37) % (V - 1));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>(1 + (i * 53) % (V - 1));

  auto cache = m->make_cache(256);
  KvSequence alone(*cache);
  const std::vector<float> expected = m->forward(alone, a);

  KvSequence sa(*cache), sb(*cache);
  std::vector<float> la(static_cast<size_t>(V)), lb(static_cast<size_t>(V));
  ForwardItem items[] = {{&sa, a, la.data(), false}, {&sb, b, lb.data(), false}};
  m->forward(items);
  EXPECT_EQ(la, expected);  // bit for bit: nothing of b's length reaches a
  // And a decode step of both past the trained context still matches a alone.
  const int32_t next[] = {5};
  const std::vector<float> step_alone = m->forward(alone, next);
  ForwardItem step[] = {{&sa, next, la.data(), false}, {&sb, next, lb.data(), false}};
  m->forward(step);
  EXPECT_EQ(la, step_alone);
  fs::remove_all(dir);
}

// tiny-phi3-longrope-bf16 (LongRoPE): the pass that takes a sequence past the original context
// computes it again with the long factors, so its logits are those of a prefill of all its ids: alone,
// beside a short sequence in one batch, from a forked prefix (whose other owner keeps its keys), every
// row of an all-logits pass, and back under the original context after a truncation.
TEST(Rope, LongRopeCrossingComputesTheSequenceAgain) {
  auto m = Model::load(test::model_dir("tiny-phi3-longrope-bf16"), {.threads = 2, .progress = {}});
  ASSERT_EQ(m->config().rope.scaling, RopeScaling::LongRope);
  const int64_t ctx = m->config().rope.original_max_position_embeddings;
  const int64_t V = m->config().vocab_size;
  const size_t n0 = static_cast<size_t>(ctx);
  std::vector<int32_t> ids(n0 + 8);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + (i * 71) % (V - 3));
  auto cache = m->make_cache(1024);
  auto prefix = [&](size_t n) { return std::span<const int32_t>(ids.data(), n); };
  auto at = [&](size_t p, size_t n = 1) { return std::span<const int32_t>(ids.data() + p, n); };
  auto fresh = [&](size_t n) {
    KvSequence s(*cache);
    return m->forward(s, prefix(n));
  };

  KvSequence a(*cache);
  m->forward(a, prefix(n0));
  EXPECT_EQ(m->recompute_length(a, 1), ctx);
  EXPECT_EQ(m->forward(a, at(n0)), fresh(n0 + 1));
  EXPECT_EQ(m->recompute_length(a, 1), 0);  // its keys are long-rotated from now on

  KvSequence b(*cache), other(*cache), other_alone(*cache);
  m->forward(b, prefix(n0));
  m->forward(other, prefix(5));
  m->forward(other_alone, prefix(5));
  std::vector<float> lb(static_cast<size_t>(V)), lo(static_cast<size_t>(V));
  ForwardItem items[] = {{&b, at(n0), lb.data(), false}, {&other, at(5), lo.data(), false}};
  m->forward(items);
  EXPECT_EQ(lb, fresh(n0 + 1));
  EXPECT_EQ(lo, m->forward(other_alone, at(5)));

  KvSequence base(*cache), twin(*cache);
  m->forward(base, prefix(n0 - 1));
  m->forward(twin, prefix(n0 - 1));
  KvSequence f = base.fork();
  EXPECT_EQ(m->forward(f, at(n0 - 1, 2)), fresh(n0 + 1));
  EXPECT_EQ(m->forward(base, at(n0 - 1)), m->forward(twin, at(n0 - 1)));  // still short-rotated

  KvSequence c(*cache), whole(*cache);
  m->forward(c, prefix(n0));
  std::vector<float> rows(static_cast<size_t>(3 * V)), all(static_cast<size_t>((n0 + 3) * V));
  ForwardItem three{&c, at(n0, 3), rows.data(), true}, every{&whole, prefix(n0 + 3), all.data(), true};
  m->forward(std::span<ForwardItem>(&three, 1));
  m->forward(std::span<ForwardItem>(&every, 1));
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.end() - 3 * V));

  a.truncate(10);  // long-rotated keys, and a length that takes the short factors again
  EXPECT_EQ(m->forward(a, at(10)), fresh(11));
}

}  // namespace
}  // namespace ember::model
