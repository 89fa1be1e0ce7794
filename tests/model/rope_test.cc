// RoPE angles per sequence: with dynamic NTK scaling past the trained context, a sequence's rotation
// depends on its own length only, so its logits are the same alone or beside a longer sequence.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ember::model
