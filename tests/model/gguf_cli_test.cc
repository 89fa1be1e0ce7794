// The CLI with -m FILE.gguf: logits, generate, tokenize and template run on a GGUF file alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
