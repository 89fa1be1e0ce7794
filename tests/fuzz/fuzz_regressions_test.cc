// Every input a fuzz target once failed on, kept in regressions/<fuzzer>/, run through that
// target's harness: it must return normally (the harness aborts on a broken invariant, and the
// sanitizer build catches memory errors). Inputs too large to keep as files are built here.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#define EMBER_HARNESS(name) extern "C" int name##_one(const uint8_t* data, size_t size);
EMBER_HARNESS(fuzz_safetensors)
EMBER_HARNESS(fuzz_config)
EMBER_HARNESS(fuzz_gguf)
EMBER_HARNESS(fuzz_tokenizer)
EMBER_HARNESS(fuzz_tokenizer_text)
EMBER_HARNESS(fuzz_jinja)
EMBER_HARNESS(fuzz_openai_request)
#undef EMBER_HARNESS

namespace {

using Harness = int (*)(const uint8_t*, size_t);

int run(Harness h, const std::string& input) {
  return h(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

// Every kept input, folder by folder (a folder is named for its fuzz target); only targets that once
// failed have a folder, so the test walks what exists instead of skipping the others.
TEST(FuzzRegressions, EveryKeptInputRunsCleanly) {
  const std::map<std::string, Harness> harnesses = {
      {"fuzz_safetensors", fuzz_safetensors_one},   {"fuzz_config", fuzz_config_one},
      {"fuzz_gguf", fuzz_gguf_one},
      {"fuzz_tokenizer", fuzz_tokenizer_one},       {"fuzz_tokenizer_text", fuzz_tokenizer_text_one},
      {"fuzz_jinja", fuzz_jinja_one},               {"fuzz_openai_request", fuzz_openai_request_one}};
  size_t inputs = 0;
  for (const auto& folder : std::filesystem::directory_iterator(EMBER_FUZZ_REGRESSIONS)) {
    const auto h = harnesses.find(folder.path().filename().string());
    ASSERT_NE(h, harnesses.end()) << "no fuzz target named " << folder.path();
    for (const auto& e : std::filesystem::directory_iterator(folder.path())) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(run(h->second, ss.str()), 0);
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 0u) << "no kept inputs under " << EMBER_FUZZ_REGRESSIONS;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shared model files that fuzz.sh seeds its targets with pass the same harnesses here, so a seed
// that breaks an invariant (a new dtype, a new config key) fails in ctest, not first in the fuzz run.
TEST(FuzzRegressions, EverySharedModelFileRunsCleanly) {
  namespace fs = std::filesystem;
  size_t configs = 0, files = 0;
  for (const auto& m : fs::directory_iterator(fs::path(EMBER_SHARED_DIR) / "models")) {
    if (!m.is_directory()) continue;
    if (fs::exists(m.path() / "config.json")) {
      SCOPED_TRACE((m.path() / "config.json").string());
      EXPECT_EQ(run(fuzz_config_one, read_file(m.path() / "config.json")), 0);
      ++configs;
    }
    for (const auto& e : fs::directory_iterator(m.path())) {
      if (e.path().extension() != ".safetensors" || e.file_size() > (1200u << 10)) continue;  // as make_seeds.py
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(run(fuzz_safetensors_one, read_file(e.path())), 0);
      ++files;
    }
  }
  EXPECT_GT(configs, 0u);
  EXPECT_GT(files, 0u);
}

// Bodies nested far deeper than a fuzzer's short inputs reach: the request parser refuses them
// before any recursive JSON copy or render could overflow the stack.
TEST(FuzzRegressions, DeeplyNestedRequestBodies) {
  const int n = 200000;
  EXPECT_EQ(run(fuzz_openai_request_one, repeat("[", n) + repeat("]", n)), 0);
  EXPECT_EQ(run(fuzz_openai_request_one, R"({"messages": [{"role": "user", "content": "hi", "x": )" + repeat("{\"a\":", n) +
                                             "1" + repeat("}", n) + "}]}"),
            0);
  EXPECT_EQ(run(fuzz_openai_request_one, R"({"messages": [{"role": "user", "content": "hi"}], "tools": )" + repeat("[", n) +
                                             repeat("]", n) + "}"),
            0);
}

}  // namespace
