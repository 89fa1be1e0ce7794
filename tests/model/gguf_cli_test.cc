// The CLI with -m FILE.gguf: logits, generate, tokenize and template run on a GGUF file alone
// (Gemma 4's against its goldens, and ember bench's bytes per token on it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf_golden.h"
#include "gguf_test_writer.h"
#include "model/model.h"
#include "run_command.h"
#include "test_paths.h"

namespace ember::model {
namespace {

std::string ember(const std::string& args) { return "'" + test::ember_binary() + "' " + args; }
std::string gguf(const std::string& file) { return "'" + test::model_dir("gguf/" + file) + "'"; }

TEST(GgufCli, LogitsJsonl) {
  const test::Output o = test::run_command("echo '{\"ids\": [1, 80, 147, 201, 282]}' | " +
                                           ember("logits -m " + gguf("story-656k-f32.gguf") + " --jsonl -t 2"));
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["logits"].size(), 2048u);  // story-656k's vocabulary
}

TEST(GgufCli, GenerateFromAFloatAndAKQuantFile) {
  const test::Output f = test::run_command(ember("generate -m " + gguf("story-656k-f32.gguf") +
                                                 " -p 'Once upon a time' -n 12 -t 2 -q 2>&1"));
  ASSERT_EQ(f.status, 0) << f.out;
  EXPECT_GT(f.out.size(), std::string("Once upon a time").size()) << f.out;
  // K-quant matrices are held as stored: nothing is requantized at load.
  const test::Output k = test::run_command(ember("generate -m " + gguf("tiny-kq-llama-q4_k_m.gguf") + " -p 'Hello' -n 4 -t 2 2>&1"));
  ASSERT_EQ(k.status, 0) << k.out;
  EXPECT_EQ(k.out.find("requantized"), std::string::npos) << k.out;
}

// Every file of ../shared/testdata/gguf/gemma4 through the CLI: `ember logits` gives each case's
// golden logits within the README's tolerance, and `ember generate` continues a prompt with every
// matrix held as stored.
TEST(GgufCli, Gemma4LogitsAndGenerate) {
  const std::vector<test::GgufCase> files = test::gguf_cases("gguf/gemma4");
  ASSERT_FALSE(files.empty());
  for (const test::GgufCase& f : files) {
    SCOPED_TRACE(f.file);
    const nlohmann::json entry = test::read_json(f.expectation)["files"][f.file];
    std::string lines;
    for (const auto& c : entry["cases"]) lines += nlohmann::json{{"ids", c["ids"]}}.dump() + "\n";
    const test::TempFolder dir;
    const std::string input = dir.write("ids.jsonl", lines);
    const test::Output o = test::run_command(ember("logits -m " + gguf(f.file) + " --jsonl -t 2 < '" + input + "'"));
    ASSERT_EQ(o.status, 0) << o.out;
    std::istringstream out(o.out);
    std::string line;
    for (const auto& c : entry["cases"]) {
      ASSERT_TRUE(std::getline(out, line)) << o.out;
      const auto logits = nlohmann::json::parse(line)["logits"].get<std::vector<float>>();
      const auto expected = c["logits"].get<std::vector<float>>();
      ASSERT_EQ(logits.size(), expected.size());
      EXPECT_LE(test::max_abs_diff(logits, expected), test::tolerance(entry, c)) << c["prompt"];
    }
    const test::Output g = test::run_command(ember("generate -m " + gguf(f.file) + " -p 'Once upon a time' -n 12 -t 2 2>&1"));
    ASSERT_EQ(g.status, 0) << g.out;
    EXPECT_NE(g.out.find("Once upon a time"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("generated 12 tokens"), std::string::npos) << g.out;
    EXPECT_EQ(g.out.find("requantized"), std::string::npos) << g.out;
    // ember bench: bytes per token are the weights a decode step reads (the PLE table's row among
    // them) plus the keys it reads; the cache stores only the layers that compute keys.
    const test::Output b = test::run_command(ember("bench -m " + gguf(f.file) + " -p 8 -n 2 --reps 1 --no-warmup --json 2>/dev/null"));
    ASSERT_EQ(b.status, 0) << b.out;
    const nlohmann::json j = nlohmann::json::parse(b.out);
    auto m = Model::load(test::model_dir("gguf/" + f.file), {.threads = 1, .progress = {}});
    EXPECT_DOUBLE_EQ(j["decode_bytes_per_token"].get<double>() - j["decode_kv_bytes_per_token"].get<double>(),
                     static_cast<double>(m->decode_weight_bytes()));
    const ModelConfig& c = m->config();
    int64_t stored = 0, all = 0;
    for (size_t l = 0; l < c.layers.size(); ++l) {
      const int64_t bytes = 2 * c.kv_dim_of(l) * 2;  // keys and values, f16 (bench's default)
      all += bytes;
      if (c.layers[l].kv_source < 0) stored += bytes;
    }
    EXPECT_EQ(j["kv_cache_bytes_per_position"].get<int64_t>(), stored);
    EXPECT_LT(stored, all);
  }
}

// The hybrids from GGUF: logits over the whole vocabulary and a continuation, every matrix held as stored.
TEST(GgufCli, HybridLogitsAndGenerate) {
  for (const char* file : {"tiny-qwen3next-q8_0.gguf", "tiny-kq-qwen35-q4_k_m.gguf"}) {
    SCOPED_TRACE(file);
    const test::Output o = test::run_command("echo '{\"ids\": [1, 80, 147, 201, 282]}' | " +
                                             ember("logits -m " + gguf(file) + " --jsonl -t 2"));
    ASSERT_EQ(o.status, 0) << o.out;
    EXPECT_EQ(nlohmann::json::parse(o.out)["logits"].size(), 2048u);  // the tiny hybrids' vocabulary
    const test::Output g = test::run_command(ember("generate -m " + gguf(file) + " -p 'Once upon a time' -n 8 -t 2 2>&1"));
    ASSERT_EQ(g.status, 0) << g.out;
    EXPECT_GT(g.out.size(), std::string("Once upon a time").size()) << g.out;
    EXPECT_EQ(g.out.find("requantized"), std::string::npos) << g.out;
  }
}

TEST(GgufCli, TokenizeAndTemplate) {
  // The same ids as Hugging Face's qwen3 tokenizer folder.
  const std::string line = "echo '{\"text\": \"Hello world<|im_end|>\", \"add_special_tokens\": false}' | ";
  const test::Output t = test::run_command(line + ember("tokenize -m " + gguf("tiny-qwen3tok-q8_0.gguf") + " --jsonl"));
  const test::Output hf = test::run_command(line + ember("tokenize -m '" + test::shared_dir() + "/tokenizers/qwen3' --jsonl"));
  ASSERT_EQ(t.status, 0) << t.out;
  ASSERT_EQ(hf.status, 0) << hf.out;
  EXPECT_EQ(t.out, hf.out);
  const std::string ids = nlohmann::json::parse(t.out)["ids"].dump();
  const test::Output d = test::run_command("echo '{\"ids\": " + ids + ", \"skip_special_tokens\": false}' | " +
                                           ember("detokenize -m " + gguf("tiny-qwen3tok-q8_0.gguf") + " --jsonl"));
  ASSERT_EQ(d.status, 0) << d.out;
  EXPECT_NE(d.out.find("Hello world<|im_end|>"), std::string::npos) << d.out;
  // The chat template from the GGUF's metadata renders as the folder's does.
  const std::string conv =
      "echo '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true}' | ";
  const test::Output r = test::run_command(conv + ember("template -m " + gguf("tiny-qwen3tok-q8_0.gguf") + " --jsonl"));
  const test::Output rf = test::run_command(conv + ember("template -m '" + test::shared_dir() + "/tokenizers/qwen3' --jsonl"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("<|im_start|>user"), std::string::npos) << r.out;
  EXPECT_EQ(r.out, rf.out);
}

}  // namespace
}  // namespace ember::model
