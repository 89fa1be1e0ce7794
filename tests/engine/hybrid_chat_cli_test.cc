// `ember chat` on a hybrid model with a chat template, as a user runs it: each piped line gets a
// reply, and the second turn's prompt, which repeats the first turn's, is prefilled only from the
// deepest state snapshot at or below what it shares (its -v line counts the tokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/mapped_file.h"
#include "model/kv_cache.h"
#include "run_command.h"
#include "test_paths.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

// tiny-qwen35-bf16's files with TinyLlama-Zephyr's chat template added to its tokenizer_config.json.
std::string folder_with_template() {
  const fs::path src = model_dir("tiny-qwen35-bf16");
  const fs::path dir = fs::temp_directory_path() / (std::to_string(::getpid()) + "_hybrid_chat");
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "special_tokens_map.json",
                        "generation_config.json"}) {
    fs::remove(dir / f);
    fs::create_symlink(src / f, dir / f);
  }
  nlohmann::json cfg = nlohmann::json::parse(read_file((src / "tokenizer_config.json").string()));
  cfg["chat_template"] = read_file(shared_path("chat_templates", "tinyllama-zephyr.jinja"));
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  return dir.string();
}

TEST(HybridChatCli, SecondTurnPrefillsFromTheDeepestSnapshot) {
  const std::string dir = folder_with_template();
  const Output o = run_command("printf 'Hello!\\nTell me a story.\\n' | " + ember_binary() + " chat -m " + dir +
                               " --no-think -n 20 --temperature 0 -v 2>&1");
  fs::remove_all(dir);
  ASSERT_EQ(o.status, 0) << o.out;
  const std::regex line(R"(\[prompt (\d+) tokens, prefilled (\d+))");
  std::vector<std::pair<int64_t, int64_t>> turns;  // (prompt, prefilled)
  for (auto it = std::sregex_iterator(o.out.begin(), o.out.end(), line); it != std::sregex_iterator(); ++it)
    turns.emplace_back(std::stoll((*it)[1]), std::stoll((*it)[2]));
  ASSERT_EQ(turns.size(), 2u) << o.out;
  EXPECT_EQ(turns[0].second, turns[0].first);
  // The second prompt holds the first one whole: at least its deepest block boundary is reused.
  const int64_t block = model::KvCache::kDefaultBlock;
  EXPECT_LE(turns[1].second, turns[1].first - turns[0].first / block * block) << o.out;
  EXPECT_GT(turns[1].second, 0);
}

}  // namespace
}  // namespace ember::test
