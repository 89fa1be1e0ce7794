// Logprobs of tokens that hold part of a character: tiny-qwen3tok-q8_0.gguf (random weights, Qwen3's
// byte-level tokenizer, which writes 🫠 as two tokens of two bytes each) with its reply forced by a
// `grammar`. Each entry carries its own bytes, and a partial character's token is "bytes:\xNN...",
// as OpenAI writes it: the entries' bytes concatenate to the content, streamed or not, and the
// legacy shape's text_offset advances by them.
#include <gtest/gtest.h>

#include <set>

#include "base/utf8.h"
#include "http_helpers.h"
#include "model/load_tokenizer.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::test {
namespace {

constexpr const char* kReply = "Hi \xF0\x9F\xAB\xA0 there";  // "Hi 🫠 there"

class LogprobsBytesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = model_dir("gguf/tiny-qwen3tok-q8_0.gguf");
    model_ = model::Model::load(path, {.threads = 2, .progress = {}}).release();
    tok_ = new tokenizer::Tokenizer(model::load_tokenizer(path));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
  }
  static std::unique_ptr<RunningServer> start() {
    engine::SchedulerOptions so;
    so.max_parallel = 2;
    so.context = 512;
    return std::make_unique<RunningServer>(*model_, *tok_, so, server::ServerOptions{});
  }
  static ordered_json grammar_body() {
    return {{"grammar", "root ::= " + ordered_json(kReply).dump() + "\n"}, {"max_tokens", 30}};
  }
  // The entries' bytes joined; every "bytes:" token holds bytes that are not UTF-8 alone, and every
  // other token's text is its bytes. Returns how many "bytes:" tokens there were.
  static int join_bytes(const ordered_json& entries, std::string& joined) {
    int partial = 0;
    for (const auto& e : entries) {
      std::string own;
      for (const auto& b : e["bytes"]) own += static_cast<char>(b.get<int>());
      const std::string token = e["token"];
      if (token.starts_with("bytes:")) {
        ++partial;
        EXPECT_FALSE(utf8::is_valid(own)) << token;
      } else {
        EXPECT_EQ(token, own);
      }
      for (const auto& alt : e.value("top_logprobs", ordered_json::array())) EXPECT_TRUE(alt["bytes"].is_array());
      joined += own;
    }
    return partial;
  }

  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
};

TEST_F(LogprobsBytesTest, SplitCharacterTokensCarryTheirOwnBytes) {
  auto srv = start();
  auto c = srv->client();
  for (const bool stream : {false, true}) {
    ordered_json body = grammar_body();
    body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
    body["logprobs"] = true;
    body["chat_template_kwargs"] = {{"enable_thinking", false}};
    body["top_logprobs"] = 2;
    body["stream"] = stream;
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    std::string content;
    ordered_json entries = ordered_json::array();
    if (stream) {
      for (const auto& chunk : parse_sse(res->body).chunks) {
        const auto& choice = chunk["choices"][0];
        content += choice["delta"].value("content", std::string());
        if (choice["logprobs"].is_object())
          for (const auto& e : choice["logprobs"]["content"]) entries.push_back(e);
      }
    } else {
      const auto j = ordered_json::parse(res->body);
      content = j["choices"][0]["message"]["content"];
      entries = j["choices"][0]["logprobs"]["content"];
    }
    EXPECT_EQ(content, kReply) << "stream " << stream;
    std::string joined;
    EXPECT_GE(join_bytes(entries, joined), 2) << "stream " << stream << ": " << entries.dump();
    EXPECT_EQ(joined, content) << "stream " << stream;
  }
  // The legacy shape: text_offset counts the bytes before each token.
  ordered_json text = grammar_body();
  text["prompt"] = "Say hi";
  text["logprobs"] = 1;  // the legacy route's top count
  auto res = c.Post("/v1/completions", text.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto choice = ordered_json::parse(res->body)["choices"][0];
  EXPECT_EQ(choice["text"], kReply);
  const auto& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), lp["text_offset"].size());
  size_t partial = 0, offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), offset) << i << ": " << lp.dump();
    std::string token = lp["tokens"][i];
    if (token.starts_with("bytes:")) {  // "\xNN" escapes the bytes of a partial character
      ++partial;
      std::string own;
      for (size_t k = 6; k < token.size(); ++k) {
        if (token.compare(k, 2, "\\x") == 0) {
          own += static_cast<char>(std::stoi(token.substr(k + 2, 2), nullptr, 16));
          k += 3;
        } else {
          own += token[k];
        }
      }
      token = own;
    }
    offset += token.size();
  }
  EXPECT_GE(partial, 2u) << lp.dump();
  EXPECT_EQ(offset, std::string(kReply).size()) << lp.dump();
}

// A streamed reply whose delta holds several parts (content, then a call) with logprobs: the parts
// after the first carry no tokens (the server dereferenced them and died). Each chunk has one entry
// per call.
TEST_F(LogprobsBytesTest, StreamedCallsWithLogprobsEndTheStream) {
  auto srv = start();
  auto c = srv->client();
  const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}])");
  for (const char* choice : {"auto", "required", "required without logprobs"}) {
    const bool logprobs = std::string(choice).find("without") == std::string::npos;
    const ordered_json body{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                            {"tools", tools},
                            {"tool_choice", std::string(choice).substr(0, std::string(choice).find(' '))},
                            {"stream", true},
                            {"logprobs", logprobs},
                            {"max_tokens", 100},
                            {"chat_template_kwargs", {{"enable_thinking", false}}}};
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res) << choice;
    ASSERT_EQ(res->status, 200) << res->body;
    const SseEvents events = parse_sse(res->body);
    EXPECT_TRUE(events.done) << choice << ": " << res->body;
    if (std::string(choice).starts_with("required")) {
      bool called = false;
      for (const auto& e : events.chunks) {
        const ordered_json& delta = e["choices"][0]["delta"];
        if (!delta.contains("tool_calls")) continue;
        called = true;
        std::set<size_t> indexes;  // one entry per call in a chunk, as OpenAI streams them
        for (const auto& call : delta["tool_calls"]) EXPECT_TRUE(indexes.insert(call["index"].get<size_t>()).second) << delta.dump();
      }
      EXPECT_TRUE(called) << res->body;
    }
  }
  EXPECT_EQ(c.Get("/health")->status, 200);  // still serving
}

// /v1/completions takes response_format as chat does (vLLM's completions too): the text follows it.
TEST_F(LogprobsBytesTest, TextCompletionFollowsResponseFormat) {
  auto srv = start();
  auto c = srv->client();
  const ordered_json schema = ordered_json::parse(
      R"({"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"], "additionalProperties": false})");
  const ordered_json body{{"prompt", "JSON:"},
                          {"max_tokens", 60},
                          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", schema}}}}}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto choice = ordered_json::parse(res->body)["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "stop") << choice.dump();
  const auto value = ordered_json::parse(choice["text"].get<std::string>());
  EXPECT_TRUE(value == ordered_json({{"a", "x"}}) || value == ordered_json({{"a", "y"}})) << value.dump();
  // A grammar that does not compile is the request's fault, named.
  auto bad = c.Post("/v1/completions", ordered_json{{"prompt", "x"}, {"grammar", "root ::= ("}}.dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "grammar") << bad->body;
}

}  // namespace
}  // namespace ember::test
