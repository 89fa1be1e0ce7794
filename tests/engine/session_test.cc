// Multi-turn sessions prefill only what the cache does not hold; generation stops as asked.
#include <gtest/gtest.h>

#include "base/error.h"
#include "chat_skills_eval.h"
#include "engine/chat_session.h"

namespace ember::engine {
namespace {

using nlohmann::ordered_json;

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(Session, EachTurnPrefillsOnlyTheNewTokens) {
  const std::string dir = test::model_dir("chat-skills");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  auto params = sampling::from_generation_config(dir);
  params.max_new_tokens = 60;
  ChatSession chat(*model, tok, dir);
  ChatOptions opts;
  opts.enable_thinking = false;
  const char* turns[] = {"My name is Mila.", "What is the capital of France?", "Reverse the word apple.",
                         "What is my name?", "Hello!", "How many letters are in the word garden?",
                         "I live in Oslo.", "Where do I live?", "Thank you!", "Goodbye!"};
  ordered_json messages = ordered_json::array();
  std::vector<int32_t> prev_prompt;
  for (const char* t : turns) {
    messages.push_back({{"role", "user"}, {"content", t}});
    const std::vector<int32_t> cached_before = chat.session().cached_tokens();
    const std::vector<int32_t> prompt = chat.render_prompt(messages, opts);
    const ChatReply r = chat.reply(messages, params, opts);
    const size_t reused = common_prefix(cached_before, prompt);
    // Whatever this prompt shares with the previous one (all history up to where the template
    // re-renders the last reply differently) is reused from the cache; only the rest is computed.
    EXPECT_GE(reused, common_prefix(prev_prompt, prompt)) << t;
    EXPECT_LE(prompt.size() - reused, 64u) << t;  // the new turn, not the history
    EXPECT_EQ(r.generation.prefilled_tokens, static_cast<int64_t>(prompt.size() - std::min(reused, prompt.size() - 1))) << t;
    std::printf("turn %-45s prompt %4zu tokens, prefilled %3lld\n", t, prompt.size(),
                static_cast<long long>(r.generation.prefilled_tokens));
    messages.push_back({{"role", "assistant"}, {"content", r.content}});
    prev_prompt = prompt;
  }
}

TEST(Session, PromptLongerThanContextIsAClearError) {
  const std::string dir = test::model_dir("story-656k");
  auto model = model::Model::load(dir, {.threads = 1, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  Session s(*model, tok, 8);
  const std::vector<int32_t> prompt(20, 5);
  try {
    s.generate(prompt, sampling::SamplingParams{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(s.cached_tokens().empty());
}

TEST(Session, StopsAtMaxTokensContextAndStopStrings) {
  const std::string dir = test::model_dir("story-656k");
  auto model = model::Model::load(dir, {.threads = 1, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  const auto prompt = tok.encode("Once upon a time", true);
  sampling::SamplingParams p;
  p.max_new_tokens = 10;
  Session s(*model, tok);
  GenerationResult r = s.generate(prompt, p);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 10u);
  const std::string full = r.text;

  // A stop string made of the end of one token and the start of the next stops there, unprinted.
  std::string stop;
  for (size_t k = 1; k < r.tokens.size(); ++k) {
    const std::string a = tok.decode(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + k), false);
    const std::string b = tok.decode(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + k + 1), false);
    if (a.size() >= 2 && b.size() >= a.size() + 2 && a.back() != ' ') {
      stop = a.substr(a.size() - 2) + b.substr(a.size(), 2);
      break;
    }
  }
  ASSERT_FALSE(stop.empty());
  p.stop_strings = {stop};
  Session s2(*model, tok);
  r = s2.generate(prompt, p);
  EXPECT_EQ(r.finish, FinishReason::kStopString);
  EXPECT_EQ(r.text, full.substr(0, full.find(stop)));

  Session s3(*model, tok, static_cast<int64_t>(prompt.size()) + 4);
  p.stop_strings.clear();
  r = s3.generate(prompt, p);
  EXPECT_EQ(r.finish, FinishReason::kContext);
}

// A chat reply under a grammar, sampled: the reply is a sentence of the grammar and ends by the end
// token, for several seeds; the answer is constrained, the thought before it is not.
TEST(Session, ChatReplyFollowsTheGrammar) {
  const std::string dir = test::model_dir("chat-skills");
  auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(dir);
  auto params = sampling::from_generation_config(dir);
  params.do_sample = true;
  params.temperature = 1.0f;
  params.max_new_tokens = 120;
  ChatSession chat(*model, tok, dir);
  ChatOptions opts;
  opts.grammar = GrammarConstraint{
      std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf("root ::= (\"yes\" | \"no\") \", \" [a-z]{1,8} \".\"")),
      grammar_vocabulary(tok)};
  for (const bool think : {false, true}) {
    opts.enable_thinking = think;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      params.seed = seed;
      const ordered_json messages = ordered_json::array({{{"role", "user"}, {"content", "Is the sky blue?"}}});
      const ChatReply r = chat.reply(messages, params, opts);
      SCOPED_TRACE(r.content);
      EXPECT_TRUE(r.content.rfind("yes, ", 0) == 0 || r.content.rfind("no, ", 0) == 0);
      EXPECT_EQ(r.content.back(), '.');
      EXPECT_EQ(r.generation.finish, FinishReason::kEos);
      EXPECT_EQ(r.reasoning_content.empty(), !think);  // the thought itself was free text
    }
  }
}

}  // namespace
}  // namespace ember::engine
