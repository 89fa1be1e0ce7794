// The generation rules on their own: logits rows made by the test decide each token, so every rule
// (end tokens, stop strings, forced tokens, length and context limits, reasoning split) is checked
// without a model.
#include "engine/generation.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

class GenerationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_folder(test::model_dir("chat-skills")));
  }
  static void TearDownTestSuite() { delete tok_; }

  // A logits row whose argmax is `token`.
  static std::vector<float> pick(int32_t token) {
    std::vector<float> row(static_cast<size_t>(tok_->vocab_size()), 0.0f);
    row[static_cast<size_t>(token)] = 10.0f;
    return row;
  }
  static std::string text_of(int32_t token) { return tok_->decode(std::vector<int32_t>{token}, false); }
  // The first token of `text` that shows a letter (not a lone space marker).
  static int32_t id(const std::string& text) {
    for (int32_t t : tok_->encode(text, false))
      if (const std::string s = text_of(t); !s.empty() && s[0] != ' ') return t;
    ADD_FAILURE() << "no token of '" << text << "' shows text";
    return 0;
  }
  static GenerationRequest request(size_t prompt_tokens = 3) {
    GenerationRequest r;
    r.prompt.assign(prompt_tokens, id("a"));
    r.params.eos_token_ids = {tok_->token_to_id("<|im_end|>").value()};
    return r;
  }
  static inline tokenizer::Tokenizer* tok_ = nullptr;
};

TEST_F(GenerationTest, LimitsHaveOneDefinition) {
  sampling::SamplingParams p;
  EXPECT_EQ(max_new_tokens(p, 10, 64), 54);  // the rest of the context
  p.max_length = 30;
  EXPECT_EQ(max_new_tokens(p, 10, 64), 20);
  p.max_new_tokens = 100;
  EXPECT_EQ(max_new_tokens(p, 10, 64), 54);  // never past the context
  p.max_new_tokens = 5;
  EXPECT_EQ(max_new_tokens(p, 10, 64), 5);
  EXPECT_THROW(check_prompt_fits(0, 64), Error);
  EXPECT_THROW(check_prompt_fits(64, 64), Error);
  EXPECT_NO_THROW(check_prompt_fits(63, 64));
  EXPECT_THROW(Generation(*tok_, request(64), 64, tok_->vocab_size()), Error);
}

TEST_F(GenerationTest, EndTokenFinishesAndIsKept) {
  Generation g(*tok_, request(), 64, tok_->vocab_size());
  GenerationStep s = g.step(pick(id("hello")));
  EXPECT_FALSE(s.finished);
  EXPECT_EQ(s.feed, std::vector<int32_t>{id("hello")});
  EXPECT_EQ(s.content, text_of(id("hello")));
  const int32_t eos = request().params.eos_token_ids[0];
  s = g.step(pick(eos));
  ASSERT_TRUE(s.finished);
  EXPECT_EQ(*s.finished, FinishReason::kEos);
  EXPECT_TRUE(g.done());
  EXPECT_EQ(std::vector<int32_t>(g.generated().begin(), g.generated().end()), (std::vector<int32_t>{id("hello"), eos}));
  EXPECT_TRUE(g.step(pick(eos)).tokens.empty());  // nothing after the end
}

TEST_F(GenerationTest, StopStringHidesItselfAndWhatFollows) {
  GenerationRequest r = request();
  r.params.stop_strings = {"upon a ti"};
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  std::string text;
  std::optional<FinishReason> why;
  for (int32_t i : tok_->encode("Once upon a time there was", false)) {
    if (why) break;
    GenerationStep s = g.step(pick(i));
    text += s.content;
    why = s.finished;
  }
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, FinishReason::kStopString);
  EXPECT_EQ(text, "Once ");
}

TEST_F(GenerationTest, LengthAndContextLimits) {
  GenerationRequest r = request();
  r.params.max_new_tokens = 2;
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  EXPECT_FALSE(g.step(pick(id("hello"))).finished);
  const GenerationStep s = g.step(pick(id("hello")));  // the second token ends it: nothing to feed
  ASSERT_TRUE(s.finished);
  EXPECT_EQ(*s.finished, FinishReason::kLength);
  EXPECT_TRUE(s.feed.empty());
  EXPECT_EQ(s.content, text_of(id("hello")));
  EXPECT_EQ(g.generated().size(), 2u);

  Generation c(*tok_, request(3), 5, tok_->vocab_size());  // room for two tokens; the second fills the context
  EXPECT_FALSE(c.step(pick(id("hello"))).finished);
  const GenerationStep last = c.step(pick(id("hello")));
  ASSERT_TRUE(last.finished);
  EXPECT_EQ(*last.finished, FinishReason::kContext);
  EXPECT_STREQ(finish_reason_name(*last.finished), "length");
}

TEST_F(GenerationTest, ThinkingBudgetForcesTheCloseAndReasoningIsSplit) {
  const int32_t open = tok_->token_to_id("<think>").value(), close = tok_->token_to_id("</think>").value();
  GenerationRequest r = request();
  r.split_reasoning = true;
  r.starts_in_reasoning = true;
  r.think_budget.emplace(open, std::vector<int32_t>{close}, 2, /*start_in_thought=*/true);
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  std::string reasoning, content;
  auto run = [&](int32_t t) {
    GenerationStep s = g.step(pick(t));
    reasoning += s.reasoning;
    content += s.content;
    return s;
  };
  run(id("hello"));
  const GenerationStep forced = run(id("hello"));  // the budget's second token: </think> follows
  ASSERT_EQ(forced.tokens.size(), 2u);
  EXPECT_EQ(forced.tokens[1].id, close);
  EXPECT_EQ(forced.feed, (std::vector<int32_t>{id("hello"), close}));
  run(id("world"));
  const GenerationStep end = g.finish(FinishReason::kCancelled);
  reasoning += end.reasoning;
  content += end.content;
  EXPECT_EQ(reasoning, text_of(id("hello")) + text_of(id("hello")));
  EXPECT_EQ(content, text_of(id("world")));
  EXPECT_TRUE(g.thought_forced_closed());
}

// A budget of 0 closes a thought the model opens itself at once.
TEST_F(GenerationTest, ZeroBudgetClosesAThoughtAsItOpens) {
  const int32_t open = tok_->token_to_id("<think>").value(), close = tok_->token_to_id("</think>").value();
  GenerationRequest r = request();
  r.split_reasoning = true;
  r.think_budget.emplace(open, std::vector<int32_t>{close}, 0, /*start_in_thought=*/false);
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  const GenerationStep s = g.step(pick(open));
  EXPECT_EQ(s.feed, (std::vector<int32_t>{open, close}));
  const GenerationStep next = g.step(pick(id("world")));
  EXPECT_EQ(next.reasoning, "");
  EXPECT_TRUE(g.thought_forced_closed());
}

// A grammar masks the logits before sampling: a row that prefers a forbidden token still yields
// text of the grammar, and the end token comes (allowed only then) once the grammar is complete.
GrammarConstraint grammar_of(const tokenizer::Tokenizer& tok, const std::string& gbnf) {
  return {std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(gbnf)), grammar_vocabulary(tok)};
}

TEST_F(GenerationTest, GrammarMasksBeforeSamplingAndEndsWhenComplete) {
  GenerationRequest r = request();
  r.grammar = grammar_of(*tok_, "root ::= \"ab\" [c-d]");
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  std::string content;
  GenerationStep s;
  for (int i = 0; i < 10 && !g.done(); ++i) {
    s = g.step(pick(id("zebra")));  // never allowed: the best allowed token is sampled instead
    content += s.content;
  }
  ASSERT_TRUE(g.done());
  EXPECT_EQ(s.finished, FinishReason::kEos);
  EXPECT_EQ(g.generated().back(), tok_->token_to_id("<|im_end|>").value());
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content.substr(0, 2), "ab");
  EXPECT_TRUE(content[2] == 'c' || content[2] == 'd');
}

TEST_F(GenerationTest, GrammarWithoutEndTokenStopsWhenNothingCanFollow) {
  GenerationRequest r = request();
  r.params.eos_token_ids.clear();
  r.grammar = grammar_of(*tok_, "root ::= \"a\"");
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  const GenerationStep first = g.step(pick(id("zebra")));
  EXPECT_EQ(first.content, "a");
  const GenerationStep second = g.step(pick(id("zebra")));
  EXPECT_EQ(second.finished, FinishReason::kEos);
  EXPECT_TRUE(second.tokens.empty());
}

// A grammar that this vocabulary cannot produce is an error naming it and what it expected, never
// an empty "stop": at once when no token can start it (the server answers 400 before any token),
// later when the output reaches a point no token continues.
TEST_F(GenerationTest, GrammarTheVocabularyCannotFollowIsAnError) {
  GenerationRequest r = request();
  r.grammar = grammar_of(*tok_, "root ::= [\x01]");  // no token of this vocabulary is that byte
  r.grammar->source = "the grammar in g.gbnf";
  try {
    check_request(r, 64, tok_->vocab_size());
    ADD_FAILURE() << "no error";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.code, "grammar_unsatisfiable");
    EXPECT_NE(std::string(e.what()).find("the grammar in g.gbnf cannot start"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\\x01"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Generation(*tok_, r, 64, tok_->vocab_size()), RequestError);

  r.grammar = grammar_of(*tok_, "root ::= \"ab\" [\x01]");
  Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
  std::string content;
  try {
    for (int i = 0; i < 10; ++i) content += g.step(pick(id("zebra"))).content;
    ADD_FAILURE() << "no error; content " << content;
  } catch (const RequestError& e) {
    EXPECT_EQ(content, "ab");
    EXPECT_NE(std::string(e.what()).find("cannot continue after"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 bytes of output"), std::string::npos) << e.what();
  }
}

// A model that spells its end token out in plain pieces (story-656k writes "<|", "end", "_story",
// "|>" before <|end_story|>) ends there, and that text is not shown.
TEST_F(GenerationTest, EndTokenSpelledOutEndsTheTextUnshown) {
  const std::string end = "<|im_end|>";
  // Encoded whole, the end token's text would come back as the end token: spell it in two parts,
  // the second without the word-start marker an encode puts before its text.
  std::vector<int32_t> pieces = tok_->encode("Hi.<|im_end", /*add_special_tokens=*/false);
  const std::vector<int32_t> a = tok_->encode("a", false), tail = tok_->encode("a|>", false);
  ASSERT_TRUE(std::equal(a.begin(), a.end(), tail.begin()));
  pieces.insert(pieces.end(), tail.begin() + static_cast<std::ptrdiff_t>(a.size()), tail.end());
  for (int32_t t : pieces) ASSERT_FALSE(tok_->is_special(t)) << t;
  ASSERT_EQ(tok_->decode(pieces, false), "Hi." + end);
  Generation g(*tok_, request(), 64, tok_->vocab_size());
  std::string content;
  for (int32_t t : pieces) {
    if (g.done()) break;
    content += g.step(pick(t)).content;
  }
  EXPECT_TRUE(g.done());
  EXPECT_EQ(content, "Hi.");
}

// The grammar starts after the thought: one the prompt opens, or one the reply opens as its first
// token; a reply that starts without one cannot open it later.
TEST_F(GenerationTest, GrammarStartsAfterTheThought) {
  const int32_t open = tok_->token_to_id("<think>").value(), close = tok_->token_to_id("</think>").value();
  enum Mode { kPromptOpens, kReplyOpens, kNoThought };
  for (const Mode mode : {kPromptOpens, kReplyOpens, kNoThought}) {
    GenerationRequest r = request();
    r.split_reasoning = true;
    r.starts_in_reasoning = mode == kPromptOpens;
    r.grammar = grammar_of(*tok_, "root ::= \"ok\"");
    Generation g(*tok_, std::move(r), 64, tok_->vocab_size());
    std::string reasoning, content;
    const auto run = [&](int32_t t) {
      const GenerationStep s = g.step(pick(t));
      reasoning += s.reasoning;
      content += s.content;
    };
    if (mode == kReplyOpens) run(open);
    run(id("zebra"));  // inside a thought: no mask; else masked to the grammar
    if (mode != kNoThought) run(close);
    for (int i = 0; i < 5 && !g.done(); ++i) run(mode == kNoThought ? open : id("zebra"));  // <think> masked now
    EXPECT_EQ(reasoning, mode == kNoThought ? "" : text_of(id("zebra"))) << mode;
    EXPECT_EQ(content, "ok") << mode;
    EXPECT_TRUE(g.done());
  }
}

}  // namespace
}  // namespace ember::engine
