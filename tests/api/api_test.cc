// The public C++ API (include/ember/ember.h) as a program that links libember.so sees it.
#include "ember/ember.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_paths.h"

namespace {

using nlohmann::json;

// The reference's greedy answers to the chat-skills evaluation: rendered prompt ids, answer ids.
std::vector<json> golden_cases() {
  std::ifstream in(ember::test::testdata("chat_skills/golden_ids.jsonl"));
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

std::vector<ember::Message> messages_of(const json& c) {
  std::vector<ember::Message> m;
  for (const auto& x : c["messages"]) m.push_back({x["role"].get<std::string>(), x["content"].get<std::string>()});
  return m;
}

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ember::LoadOptions load;
    load.threads = 2;
    model_ = new ember::Model(ember::test::model_dir("chat-skills"), load);
    load.quantize = "q4_0";
    draft_ = new ember::Model(ember::test::model_dir("chat-skills"), load);
    for (const json& c : golden_cases())
      if (c["enable_thinking"] == false && cases_.size() < 12) cases_.push_back(c);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete draft_;
  }
  static ember::ChatOptions no_thinking() {
    ember::ChatOptions o;
    o.enable_thinking = false;
    return o;
  }
  static inline ember::Model* model_ = nullptr;
  static inline ember::Model* draft_ = nullptr;  // chat-skills' own q4_0 copy, as a draft model
  static inline std::vector<json> cases_;
};

TEST_F(Api, TokenizeRenderAndDescribe) {
  EXPECT_EQ(model_->architecture(), "llama");
  EXPECT_GT(model_->context(), 0);
  const std::string text = "Once upon a time, there was a cat.";
  const std::vector<int32_t> ids = model_->tokenize(text, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(model_->detokenize(ids), text);
  const std::string prompt = model_->render({{"user", "Hello!"}}, true, false);
  EXPECT_NE(prompt.find("Hello!"), std::string::npos) << prompt;
  EXPECT_EQ(model_->render({{"user", "Hello!"}}, false, false).size() < prompt.size(), true);
}

TEST_F(Api, ChatRepliesAsTheReference) {
  ASSERT_FALSE(cases_.empty());
  for (const int speculate : {0, 1, 2}) {  // prompt lookup and a draft model give the same replies
    ember::ChatOptions o = no_thinking();
    o.speculate = speculate == 1;
    if (speculate == 2) o.draft = draft_;
    ember::Chat chat(*model_, o);
    for (const json& c : cases_) {
      std::string streamed;
      ember::StreamCallbacks cb;
      cb.on_content = [&](std::string_view t) { streamed += t; };
      const std::vector<ember::Message> m = messages_of(c);
      EXPECT_EQ(model_->tokenize(model_->render(m, true, false), false), c["prompt_ids"].get<std::vector<int32_t>>())
          << c["id"];
      const ember::Reply r = chat.reply(m, {}, cb);
      EXPECT_EQ(r.tokens, c["answer_ids"].get<std::vector<int32_t>>()) << c["id"] << (speculate ? " speculating" : "");
      EXPECT_EQ(streamed, r.content);
      EXPECT_EQ(r.finish_reason, "stop");
    }
  }
}

// A draft of another vocabulary is refused when the Chat is made, naming the token that differs.
TEST_F(Api, DraftOfAnotherVocabularyIsRefused) {
  ember::LoadOptions load;
  load.threads = 2;
  ember::Model story(ember::test::model_dir("story-656k"), load);
  ember::ChatOptions o = no_thinking();
  o.draft = &story;
  try {
    ember::Chat chat(*model_, o);
    ADD_FAILURE() << "no error";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("id 2048"), std::string::npos) << e.what();
  }
}

TEST_F(Api, SayKeepsTheHistoryAndReusesTheCache) {
  ember::ChatOptions o = no_thinking();
  o.system = "You are Tina, a friendly assistant.";
  ember::Chat chat(*model_, o);
  const ember::Reply first = chat.say("My name is Mila.");
  ASSERT_EQ(chat.history().size(), 3u);
  EXPECT_EQ(chat.history()[2].content, first.content);
  const ember::Reply second = chat.say("What is my name?");
  EXPECT_NE(second.content.find("Mila"), std::string::npos) << second.content;
  EXPECT_LT(second.prefilled_tokens, second.prompt_tokens);  // the first turn came from the cache
  // A failed turn leaves the conversation as it was.
  ember::SamplingOptions bad;
  bad.temperature = -1.0f;
  EXPECT_THROW(chat.say("Hello!", bad), ember::Error);
  EXPECT_EQ(chat.history().size(), 5u);
  chat.reset();
  EXPECT_EQ(chat.history().size(), 1u);
}

TEST_F(Api, ServiceAnswersConcurrentRequestsAsTheReference) {
  for (const int speculate : {0, 1, 2}) {  // prompt lookup and a draft model, batched, give the same answers
    ember::ServiceOptions so;
    so.max_parallel = 4;
    so.speculate = speculate == 1;
    if (speculate == 2) so.draft = draft_;
    ember::Service service(*model_, so);
    std::vector<ember::Service::Request> requests;
    for (const json& c : cases_) requests.push_back(service.chat(messages_of(c), {}, false));
    for (size_t i = 0; i < requests.size(); ++i) {
      std::string content;
      ember::Service::Update u;
      while (requests[i].next(u, std::chrono::milliseconds(60000))) {
        content += u.content;
        if (u.finished) break;
      }
      EXPECT_TRUE(u.finished);
      EXPECT_EQ(u.error, "");
      EXPECT_EQ(u.finish_reason, "stop");
      const auto answer = cases_[i]["answer_ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(content, model_->detokenize(std::span(answer).first(answer.size() - 1)))
          << cases_[i]["id"] << (speculate ? " speculating" : "");
    }
  }
}

TEST_F(Api, GenerateStreamsAndStops) {
  ember::SamplingOptions s;
  s.max_tokens = 2;
  std::string streamed;
  ember::StreamCallbacks cb;
  cb.on_content = [&](std::string_view t) { streamed += t; };
  const ember::Reply r = model_->generate("Once upon a time", s, cb);
  EXPECT_EQ(r.tokens.size(), 2u);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(streamed, r.content);
}

// The library plans the KV cache's memory as the ember commands do: the context is what fits the
// budget, not the model's max_position_embeddings; a budget too small for a useful context is an
// error with the numbers.
TEST(ApiMemoryPlan, ContextIsWhatFitsTheBudget) {
  const std::string dir = ember::test::model_dir("chat-skills");
  const auto c = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  const int64_t f32_per_token = 2 * c["num_hidden_layers"].get<int64_t>() * c["num_key_value_heads"].get<int64_t>() *
                                c["head_dim"].get<int64_t>() * 4;
  const int64_t trained = c["max_position_embeddings"].get<int64_t>();
  ember::LoadOptions o;
  o.kv_dtype = "f32";
  EXPECT_EQ(ember::Model(dir, o).context(), trained);
  o.kv_memory_bytes = f32_per_token * (trained - 100);
  EXPECT_EQ(ember::Model(dir, o).context(), trained - 100);
  o.kv_memory_bytes = f32_per_token * 10;
  try {
    ember::Model tiny(dir, o);
    FAIL() << "a 10-token budget loaded";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough memory for the KV cache"), std::string::npos) << e.what();
  }
}

TEST(ApiErrors, BadInputNamesTheCulprit) {
  try {
    ember::Model m("/nonexistent/model");
    FAIL() << "loaded a missing folder";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model"), std::string::npos) << e.what();
  }
  ember::LoadOptions bad;
  bad.kv_dtype = "f8";
  EXPECT_THROW(ember::Model(ember::test::model_dir("chat-skills"), bad), ember::Error);
}

}  // namespace
