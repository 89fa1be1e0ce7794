// gpt-oss's harmony format through the in-process server: tiny-gptoss-bf16 (random weights, a
// tokenizer without harmony's special tokens) with the tests/chat/templates/gpt-oss.jinja fixture,
// its reply forced by a `grammar`. The analysis channel comes back as reasoning_content and the final
// channel as content, streamed and not; Anthropic's Messages and OpenAI's Responses get the same
// split as thinking blocks and reasoning items.
#include <gtest/gtest.h>

#include <map>

#include "base/mapped_file.h"
#include "engine/chat_prompt.h"
#include "http_helpers.h"
#include "model/model.h"
#include "test_paths.h"

namespace ember::test {
namespace {

constexpr const char* kThought = "The user greets me. Greet back.";
constexpr const char* kAnswer = "Hello there!";

class HarmonyServeTest : public ::testing::Test {
 protected:
  struct Loaded {  // once for the suite
    std::unique_ptr<model::Model> model;
    tokenizer::Tokenizer tokenizer;
    std::string chat_template;
  };
  static void SetUpTestSuite() {
    const std::string dir = model_dir("tiny-gptoss-bf16");
    loaded_ = new Loaded{model::Model::load(dir, {.threads = 2, .progress = {}}), tokenizer::Tokenizer::from_folder(dir),
                         read_file(source_path("tests/chat/templates/gpt-oss.jinja"))};
  }
  static void TearDownTestSuite() { delete loaded_; }
  static std::unique_ptr<RunningServer> start(const std::string& chat_template) {
    engine::SchedulerOptions so;
    so.max_parallel = 2;
    so.context = 2048;
    server::ServerOptions o;
    o.chat_template = chat_template;
    return std::make_unique<RunningServer>(*loaded_->model, loaded_->tokenizer, so, o);
  }
  static httplib::Result post(httplib::Client& c, const std::string& path, const ordered_json& body) {
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  static std::string grammar() {
    const std::string reply = std::string("<|channel|>analysis<|message|>") + kThought +
                              "<|end|><|start|>assistant<|channel|>final<|message|>" + kAnswer;
    return "root ::= " + ordered_json(reply).dump() + "\n";
  }
  static ordered_json body(bool stream) {
    return {{"model", "m"},
            {"messages", {{{"role", "user"}, {"content", "Hi!"}}}},
            {"max_tokens", 100},
            {"stream", stream},
            {"grammar", grammar()}};
  }

  static inline Loaded* loaded_ = nullptr;
};

TEST_F(HarmonyServeTest, AnalysisIsReasoningContentAndFinalIsContent) {
  auto srv = start(loaded_->chat_template);
  auto c = srv->client();
  auto res = post(c, "/v1/chat/completions", body(false));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto msg = ordered_json::parse(res->body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], kThought) << res->body;
  EXPECT_EQ(msg["content"], kAnswer) << res->body;

  auto streamed = post(c, "/v1/chat/completions", body(true));
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const SseEvents ev = parse_sse(streamed->body);
  EXPECT_TRUE(ev.done);
  std::string reasoning, content;
  for (const auto& chunk : ev.chunks) {
    if (chunk["choices"].empty()) continue;
    const auto& d = chunk["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, kThought);
  EXPECT_EQ(content, kAnswer);
}

TEST_F(HarmonyServeTest, GrammarFieldErrorsNameIt) {
  auto srv = start(loaded_->chat_template);
  auto c = srv->client();
  ordered_json b = body(false);
  b["grammar"] = "root ::= (";
  auto bad = post(c, "/v1/chat/completions", b);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(ordered_json::parse(bad->body)["error"]["param"], "grammar") << bad->body;
  b = body(false);
  b["response_format"] = {{"type", "json_object"}};
  auto both = post(c, "/v1/chat/completions", b);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->status, 400) << both->body;
  EXPECT_EQ(ordered_json::parse(both->body)["error"]["param"], "grammar") << both->body;
}

// Each API's effort reaches the template's reasoning_effort (gpt-oss's "Reasoning: ..." line): the
// prompt each one renders has the token count of /apply-template's with that effort.
TEST_F(HarmonyServeTest, EveryApisEffortReachesTheTemplate) {
  auto srv = start(loaded_->chat_template);
  auto c = srv->client();
  const ordered_json user = {{{"role", "user"}, {"content", "Hi!"}}};
  std::map<std::string, size_t> tokens;
  for (const std::string effort : {"low", "medium", "high"}) {
    auto applied = post(c, "/apply-template", {{"messages", user}, {"reasoning_effort", effort}});
    ASSERT_TRUE(applied);
    const std::string prompt = ordered_json::parse(applied->body)["prompt"];
    EXPECT_NE(prompt.find("\nReasoning: " + effort + "\n"), std::string::npos) << prompt;
    auto tok = post(c, "/tokenize", {{"content", prompt}});
    ASSERT_TRUE(tok);
    tokens[effort] = ordered_json::parse(tok->body)["tokens"].size();
  }
  ASSERT_FALSE(tokens["low"] == tokens["medium"] && tokens["medium"] == tokens["high"])
      << "the checks below could not tell the efforts apart";
  // gpt-oss has no "none": the least effort it knows.
  auto none = post(c, "/apply-template", {{"messages", user}, {"reasoning_effort", "none"}});
  ASSERT_TRUE(none);
  EXPECT_NE(ordered_json::parse(none->body)["prompt"].get<std::string>().find("\nReasoning: low\n"), std::string::npos);
  for (const std::string effort : {"low", "medium", "high"}) {
    auto responses = post(c, "/v1/responses", {{"input", "Hi!"}, {"max_output_tokens", 1}, {"reasoning", {{"effort", effort}}}});
    ASSERT_TRUE(responses);
    ASSERT_EQ(responses->status, 200) << responses->body;
    EXPECT_EQ(ordered_json::parse(responses->body)["usage"]["input_tokens"], tokens[effort]) << effort;
    auto count = post(c, "/v1/messages/count_tokens", {{"model", "m"}, {"messages", user}, {"output_config", {{"effort", effort}}}});
    ASSERT_TRUE(count);
    ASSERT_EQ(count->status, 200) << count->body;
    EXPECT_EQ(ordered_json::parse(count->body)["input_tokens"], tokens[effort]) << effort;
  }
}

// A structured answer (response_format, --json-schema) on a harmony template: the prompt opens the
// final channel, so the JSON its grammar holds from the first token is the answer, streamed at once.
TEST_F(HarmonyServeTest, AStructuredAnswerOpensTheFinalChannel) {
  engine::ChatPromptBuilder prompts(loaded_->tokenizer, model_dir("tiny-gptoss-bf16"), loaded_->chat_template);
  const ordered_json user = {{{"role", "user"}, {"content", "Hi!"}}};
  engine::ChatOptions o;
  const engine::ChatPrompt free = prompts.build(user, o);
  EXPECT_TRUE(free.text.ends_with("<|start|>assistant")) << free.text;
  o.structured = true;
  engine::ChatPrompt json = prompts.build(user, o);
  EXPECT_EQ(json.text, free.text + "<|channel|>final<|message|>");
  EXPECT_EQ(json.ids, loaded_->tokenizer.encode(json.text, false));
  ASSERT_TRUE(json.harmony);
  EXPECT_EQ(json.harmony->push("\"yes\"").content, "\"yes\"");
}

// A template whose generation prompt opens the analysis (so that the random model's text is all
// thought): the budget ends the analysis message and opens the final channel, and Messages and
// Responses return the two parts as their thinking blocks and reasoning items.
TEST_F(HarmonyServeTest, BudgetClosesTheAnalysisForEveryApi) {
  std::string opened = loaded_->chat_template;
  const std::string gen = "<|start|>assistant{% endif %}";
  const size_t at = opened.rfind(gen);
  ASSERT_NE(at, std::string::npos);
  opened.replace(at, gen.size(), "<|start|>assistant<|channel|>analysis<|message|>{% endif %}");
  auto srv = start(opened);
  auto c = srv->client();
  const ordered_json user = {{{"role", "user"}, {"content", "Hi!"}}};

  auto chat = post(c, "/v1/chat/completions",
                   {{"messages", user}, {"max_tokens", 40}, {"temperature", 1}, {"seed", 3}, {"thinking_budget", 6}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const auto cj = ordered_json::parse(chat->body);
  const auto& msg = cj["choices"][0]["message"];
  ASSERT_TRUE(msg.contains("reasoning_content")) << chat->body;
  EXPECT_FALSE(msg["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(msg["reasoning_content"].get<std::string>().find("<|"), std::string::npos) << chat->body;
  ASSERT_TRUE(msg["content"].is_string()) << chat->body;
  EXPECT_FALSE(msg["content"].get<std::string>().empty()) << chat->body;
  EXPECT_EQ(msg["content"].get<std::string>().find("<|channel|>"), std::string::npos) << chat->body;

  auto messages = post(c, "/v1/messages",
                       {{"model", "m"}, {"messages", user}, {"max_tokens", 40}, {"temperature", 1},
                        {"thinking", {{"type", "enabled"}, {"budget_tokens", 6}}}});
  ASSERT_TRUE(messages);
  ASSERT_EQ(messages->status, 200) << messages->body;
  const auto mj = ordered_json::parse(messages->body);
  ASSERT_GE(mj["content"].size(), 2u) << messages->body;
  EXPECT_EQ(mj["content"][0]["type"], "thinking") << messages->body;
  EXPECT_EQ(mj["content"][1]["type"], "text") << messages->body;

  auto responses = post(c, "/v1/responses",
                        {{"model", "m"}, {"input", "Hi!"}, {"max_output_tokens", 40}, {"reasoning", {{"effort", "low"}}}});
  ASSERT_TRUE(responses);
  ASSERT_EQ(responses->status, 200) << responses->body;
  const auto rj = ordered_json::parse(responses->body);
  ASSERT_FALSE(rj["output"].empty()) << responses->body;
  EXPECT_EQ(rj["output"][0]["type"], "reasoning") << responses->body;
}

}  // namespace
}  // namespace ember::test
