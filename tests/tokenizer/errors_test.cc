// Load-time and use-time errors: unsupported components are named, malformed JSON is reported,
// bad ids and invalid UTF-8 are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_cases.h"

namespace ember::tokenizer {
namespace {

nlohmann::json gpt2_json() {
  std::ifstream in(test::tokenizer_dir("gpt2") + "/tokenizer.json");
  return nlohmann::json::parse(in);
}

// The message of the ember::Error that loading `j` throws ("" if it loads).
std::string load_error(const nlohmann::json& j) {
  try {
    Tokenizer::from_json(j.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  struct Case {
    const char* section;
    nlohmann::json value;
    const char* type;
  };
  const std::vector<Case> cases = {
      {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}}, "Precompiled"},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Nmt"}}}}}, "Nmt"},
      {"pre_tokenizer", {{"type", "UnicodeScripts"}}, "UnicodeScripts"},
      {"post_processor", {{"type", "FancyProcessing"}}, "FancyProcessing"},
      {"decoder", {{"type", "CTC"}, {"pad_token", "<pad>"}}, "CTC"},
  };
  for (const auto& c : cases) {
    auto j = gpt2_json();
    j[c.section] = c.value;
    const std::string msg = load_error(j);
    EXPECT_NE(msg.find(c.type), std::string::npos) << c.section << ": " << msg;
    EXPECT_NE(msg.find(c.section), std::string::npos) << msg;
  }
  auto j = gpt2_json();
  j["model"] = {{"type", "Unigram"}, {"vocab", nlohmann::json::array()}};
  EXPECT_NE(load_error(j).find("Unigram"), std::string::npos);
  j["model"] = {{"type", "WordPiece"}, {"vocab", nlohmann::json::object()}};
  EXPECT_NE(load_error(j).find("WordPiece"), std::string::npos);
}

// A crafted file with Sequences nested far deeper than real ones gets an error naming the nesting, for every
// component kind that has Sequences, instead of running out of stack.
TEST(TokenizerErrors, DeepSequenceNestingIsRefused) {
  struct Kind {
    const char* section;
    const char* list;
    nlohmann::json leaf;
  };
  const std::vector<Kind> kinds = {
      {"normalizer", "normalizers", {{"type", "NFC"}}},
      {"pre_tokenizer", "pretokenizers", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", "decoders", {{"type", "ByteLevel"}}},
      {"post_processor", "processors", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
  };
  for (const auto& k : kinds) {
    nlohmann::json node = k.leaf;
    for (int i = 0; i < 200; ++i) node = {{"type", "Sequence"}, {k.list, nlohmann::json::array({node})}};
    auto j = gpt2_json();
    j[k.section] = node;
    const std::string msg = load_error(j);
    EXPECT_NE(msg.find("nested"), std::string::npos) << k.section << ": " << msg.substr(0, 300);
    // A few levels, as real files have, still load.
    nlohmann::json shallow = k.leaf;
    for (int i = 0; i < 3; ++i) shallow = {{"type", "Sequence"}, {k.list, nlohmann::json::array({shallow})}};
    j[k.section] = shallow;
    EXPECT_EQ(load_error(j), "") << k.section;
  }
}

TEST(TokenizerErrors, MalformedJson) {
  std::ifstream in(test::tokenizer_dir("gpt2") + "/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_THROW(Tokenizer::from_json(text.substr(0, text.size() / 2)), Error);
  EXPECT_THROW(Tokenizer::from_json("[]"), Error);
  EXPECT_THROW(Tokenizer::from_json("{}"), Error);
  EXPECT_THROW(Tokenizer::from_json(text, "{not json"), Error);

  auto j = gpt2_json();
  j["model"]["merges"].push_back("nosuchtoken x");
  EXPECT_NE(load_error(j).find("nosuchtoken"), std::string::npos);
  j = gpt2_json();
  j["model"]["merges"][0] = "a b c";
  EXPECT_NE(load_error(j).find("merges[0]"), std::string::npos);
  j = gpt2_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(load_error(j).find("(unclosed"), std::string::npos);
  j = gpt2_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
  EXPECT_NE(load_error(j).find("Sideways"), std::string::npos);
  EXPECT_THROW(Tokenizer::from_folder(test::shared_dir() + "/no-such-folder"), Error);
}

// Ids size the tokenizer's tables: one past the limit (or past int32, which used to wrap) is refused
// by name instead of asking for gigabytes.
TEST(TokenizerErrors, IdsBeyondTheVocabularyLimitAreRefused) {
  for (const int64_t id : {kMaxVocabSize, int64_t{INT32_MAX}, int64_t{1} << 40}) {
    nlohmann::json j = gpt2_json();
    j["model"]["vocab"]["hello-there"] = id;
    EXPECT_NE(load_error(j).find("model.vocab[\"hello-there\"]"), std::string::npos) << id << ": " << load_error(j);
    j = gpt2_json();
    j["added_tokens"].push_back({{"id", id}, {"content", "<new>"}, {"special", true}});
    const std::string e = load_error(j);
    EXPECT_NE(e.find(".id: must be from 0 to"), std::string::npos) << id << ": " << e;
  }
}

TEST(TokenizerErrors, BadIdsAndInvalidUtf8) {
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir("gpt2"));
  const std::vector<int32_t> bad = {15496, tok.vocab_size()};
  try {
    tok.decode(bad, false);
    FAIL() << "decode accepted an id past the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(tok.vocab_size())), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}, false), Error);
  EXPECT_THROW(tok.id_to_token(-5), Error);
  StreamDecoder stream(tok, false);
  EXPECT_THROW(stream.push(tok.vocab_size() + 10), Error);
  EXPECT_THROW(tok.encode("abc\xFF", false), Error);
}

TEST(TokenizerErrors, EncodeRefusesTextPastTheLimit) {
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir("tinystories-656k"));
  const std::string at_limit(Tokenizer::kMaxEncodeBytes, 'a');
  EXPECT_FALSE(tok.encode(std::string_view(at_limit).substr(0, 1000), false).empty());
  try {
    tok.encode(at_limit + "a", false);
    FAIL() << "encode accepted " << at_limit.size() + 1 << " bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limit of " + std::to_string(Tokenizer::kMaxEncodeBytes)),
              std::string::npos) << e.what();
  }
}

// The expected values are picked from the fixture's JSON by the test itself (plain nlohmann, its own
// field access), so that a parser bug cannot agree with itself.
TEST(TokenizerConfig, FieldsAndChatTemplate) {
  const std::string dir = test::tokenizer_dir("tinyllama-1.1b-chat");
  const Tokenizer tok = Tokenizer::from_folder(dir);
  std::ifstream in(dir + "/tokenizer_config.json");
  const nlohmann::json file = nlohmann::json::parse(in);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "chat_template"})
    ASSERT_TRUE(file.at(key).is_string()) << key << " is a plain string in this fixture";
  const TokenizerConfig& c = tok.config();
  EXPECT_EQ(c.bos_token, file["bos_token"].get<std::string>());
  EXPECT_EQ(c.eos_token, file["eos_token"].get<std::string>());
  EXPECT_EQ(c.unk_token, file["unk_token"].get<std::string>());
  EXPECT_EQ(c.pad_token, file["pad_token"].get<std::string>());
  EXPECT_EQ(c.chat_template, file["chat_template"].get<std::string>());
  EXPECT_EQ(c.model_max_length, file.at("model_max_length").get<int64_t>());
  EXPECT_EQ(c.add_bos_token.has_value(), file.contains("add_bos_token"));
  std::vector<std::string> raw_keys, file_keys;
  for (const auto& [k, v] : c.raw.items()) raw_keys.push_back(k);
  for (const auto& [k, v] : file.items()) file_keys.push_back(k);
  std::sort(raw_keys.begin(), raw_keys.end());
  EXPECT_EQ(raw_keys, file_keys);  // raw is the whole file (nlohmann::json lists keys sorted)

  const auto cfg = parse_tokenizer_config(
      R"({"bos_token": {"content": "<b>"}, "add_bos_token": true,
          "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(cfg.bos_token, "<b>");
  EXPECT_EQ(cfg.add_bos_token, std::optional<bool>(true));
  EXPECT_FALSE(cfg.add_eos_token.has_value());
  EXPECT_EQ(cfg.chat_template, "D");
  EXPECT_EQ(parse_tokenizer_config("{}", "FILE").chat_template, "FILE");
}

// transformers' get_chat_template: "tool_use" when tools are given, else "default"; a list without
// "default" is refused (naming the templates it has), as transformers raises.
TEST(TokenizerConfig, SelectChatTemplateAsTransformers) {
  const auto both = parse_tokenizer_config(
      R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(select_chat_template(both, false, "dir"), "D");
  EXPECT_EQ(select_chat_template(both, true, "dir"), "T");
  const auto single = parse_tokenizer_config(R"({"chat_template": "S"})");
  EXPECT_EQ(select_chat_template(single, true, "dir"), "S");
  const auto no_default = parse_tokenizer_config(
      R"({"chat_template": [{"name": "rag", "template": "R"}, {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(no_default.chat_template, "");
  EXPECT_EQ(select_chat_template(no_default, true, "dir"), "T");
  try {
    select_chat_template(no_default, false, "dir");
    FAIL() << "a list without \"default\" gave a template";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("dir: ", 0), 0u) << m;
    EXPECT_NE(m.find("\"default\""), std::string::npos) << m;
    EXPECT_NE(m.find("rag, tool_use"), std::string::npos) << m;
  }
  EXPECT_THROW(select_chat_template(parse_tokenizer_config("{}"), false, "dir"), Error);
  try {
    parse_tokenizer_config(R"({"chat_template": [{"name": "default"}]})");
    FAIL() << "an entry without a template was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template[0]"), std::string::npos) << e.what();
  }
}

TEST(TokenizerConfig, SpecialTokenVariablesAreTheSetOnes) {
  const auto cfg = parse_tokenizer_config(
      R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null})");
  EXPECT_EQ(special_token_variables(cfg).dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
}

TEST(Tokenizer, CopiesShareStateAndEncodeConcurrently) {
  const Tokenizer tok = Tokenizer::from_folder(test::tokenizer_dir("qwen3"));
  const std::string text = "Concurrent encoding: 你好, world! 12345 \xF0\x9F\x91\x8D";
  const auto expected = tok.encode(text, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t, copy = tok] {
      int good = 0;
      for (int i = 0; i < 200; ++i)
        good += copy.encode(text + std::to_string(i % 7), true).size() > 0 && copy.encode(text, true) == expected;
      ok[static_cast<size_t>(t)] = good;
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 200);
}

}  // namespace
}  // namespace ember::tokenizer
