// The tokenizer built from a GGUF file's metadata against Hugging Face's: every line of the shared
// tokenizer fixture of the same vocabulary (ids, decode with and without special tokens, streaming
// decode), and the special tokens and chat template of the model's tokenizer_config.json.
#include "model/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"
#include "gguf_test_writer.h"
#include "test_paths.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/stream_all.h"
#include "tokenizer/tokenizer_cases.h"

namespace ember::model {
namespace {

struct Case {
  const char* gguf;       // in ../shared/models/gguf
  const char* tokenizer;  // ../shared/tokenizers/<name> and testdata/tokenizer/<name>.jsonl
};

class GgufTokenizer : public ::testing::TestWithParam<Case> {};

TEST_P(GgufTokenizer, MatchesHuggingFaceOnEveryFixtureLine) {
  const Case c = GetParam();
  const GgufFile g(test::model_dir(std::string("gguf/") + c.gguf));
  const tokenizer::Tokenizer tok = gguf_tokenizer(g);
  const auto lines = test::read_jsonl(test::tokenizer_jsonl(c.tokenizer));
  ASSERT_FALSE(lines.empty());
  size_t ids_ok = 0, failures = 0;
  for (const auto& line : lines) {
    const std::string text = line["text"];
    const auto expected = line["ids"].get<std::vector<int32_t>>();
    const auto ids = tok.encode(text, line["add_special_tokens"].get<bool>());
    ids_ok += ids == expected;
    const std::string decoded = tok.decode(expected, false), skipped = tok.decode(expected, true);
    const bool ok = ids == expected && decoded == line["decoded"] && skipped == line["decoded_skip_special"] &&
                    test::stream_all(tok, expected, false) == decoded && test::stream_all(tok, expected, true) == skipped;
    if (!ok && ++failures <= 5)
      ADD_FAILURE() << c.gguf << " " << line["case"].get<std::string>() << "\n text: " << line["text"]
                    << "\n expected ids: " << line["ids"] << "\n got ids:      " << nlohmann::json(ids)
                    << "\n expected decoded: " << line["decoded"]
                    << "\n got decoded:      " << nlohmann::json(decoded);
  }
  EXPECT_EQ(failures, 0u) << c.gguf << ": " << failures << " of " << lines.size() << " lines differ";
  std::cout << "[ ember    ] " << c.gguf << ": ids of " << ids_ok << "/" << lines.size() << " lines match "
            << c.tokenizer << "\n";
}

TEST_P(GgufTokenizer, SpecialTokensAndChatTemplateMatchTheModelsConfig) {
  const Case c = GetParam();
  const GgufFile g(test::model_dir(std::string("gguf/") + c.gguf));
  const tokenizer::Tokenizer tok = gguf_tokenizer(g);
  const auto& cfg = tok.config();
  const std::string cfg_path = test::tokenizer_dir(c.tokenizer) + "/tokenizer_config.json";
  if (!std::filesystem::exists(cfg_path)) {  // llama-3.2's folder has none, and its GGUF no template
    EXPECT_EQ(cfg.chat_template, "");
    return;
  }
  const auto hf = tokenizer::parse_tokenizer_config(read_file(cfg_path));
  EXPECT_EQ(cfg.chat_template, hf.chat_template);
  EXPECT_EQ(cfg.bos_token, hf.bos_token);
  EXPECT_EQ(cfg.eos_token, hf.eos_token);
  EXPECT_EQ(cfg.pad_token, hf.pad_token);
  EXPECT_EQ(cfg.unk_token, hf.unk_token);
}

INSTANTIATE_TEST_SUITE_P(Shared, GgufTokenizer,
                         ::testing::Values(Case{"tiny-llama32tok-q8_0.gguf", "llama-3.2"},
                                           Case{"tiny-qwen3tok-q8_0.gguf", "qwen3"},
                                           Case{"tiny-spmtok-q8_0.gguf", "tinyllama-1.1b-chat"}),
                         [](const auto& info) {
                           std::string n = info.param.tokenizer;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// Metadata the builder refuses names the key.
TEST(GgufTokenizerErrors, NameTheKey) {
  auto message = [](const test::GgufWriter& w) {
    const test::TempFolder dir;
    try {
      gguf_tokenizer(GgufFile(dir.write("t.gguf", w.bytes())));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    test::GgufWriter w;
    EXPECT_NE(message(w).find("tokenizer.ggml.model"), std::string::npos);
  }
  {
    test::GgufWriter w;
    w.kv_string("tokenizer.ggml.model", "rwkv");
    w.kv_strings("tokenizer.ggml.tokens", {"a"});
    const std::string m = message(w);
    EXPECT_NE(m.find("\"rwkv\" is not supported"), std::string::npos) << m;
  }
  {
    test::GgufWriter w;
    w.kv_string("tokenizer.ggml.model", "gpt2");
    w.kv_string("tokenizer.ggml.pre", "deepseek-llm");
    w.kv_strings("tokenizer.ggml.tokens", {"a"});
    const std::string m = message(w);
    EXPECT_NE(m.find("tokenizer.ggml.pre"), std::string::npos) << m;
  }
  {
    test::GgufWriter w;
    w.kv_string("tokenizer.ggml.model", "llama");
    w.kv_strings("tokenizer.ggml.tokens", {"a", "b"});
    w.kv_u32("tokenizer.ggml.bos_token_id", 7);
    const std::string m = message(w);
    EXPECT_NE(m.find("tokenizer.ggml.bos_token_id"), std::string::npos) << m;
  }
  {
    test::GgufWriter w;
    w.kv_string("tokenizer.ggml.model", "gpt2");
    w.kv_strings("tokenizer.ggml.tokens", {"a", "b"});
    w.kv_strings("tokenizer.ggml.merges", {"a c"});
    const std::string m = message(w);
    EXPECT_NE(m.find("merges"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ember::model
