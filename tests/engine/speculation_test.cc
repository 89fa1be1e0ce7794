// Speculative decoding (prompt lookup) never changes an output: on every generating model of
// ../shared/models, greedy with guesses equals greedy without token for token, in a Session and in
// the batched Scheduler beside a sequence that does not guess; a stop string or an end token inside
// a run of taken guesses ends the output where plain decoding does; the cache after rejected guesses
// serves a later prompt's prefix; a seeded sampler with logprobs draws the same tokens. Stop strings,
// end tokens, thinking budgets and grammars are checked with a draft model too (SpecChatModes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "engine/chat_prompt.h"
#include "engine/chat_session.h"
#include "engine/grammar_constraint.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "engine/speculation.h"
#include "model/load_tokenizer.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

SpecOptions ngram(bool adaptive, int64_t max_draft = 4) {
  SpecOptions o;
  o.mode = SpecMode::kNgram;
  o.max_draft = max_draft;
  o.adaptive = adaptive;
  return o;
}

std::vector<int32_t> ids_of(const StreamUpdate&, const std::vector<GeneratedToken>& t) {
  std::vector<int32_t> ids;
  for (const auto& g : t) ids.push_back(g.id);
  return ids;
}

struct Drained {
  std::vector<int32_t> tokens;
  std::string text;
  StreamUpdate last;
};

Drained drain(RequestStream& s) {
  Drained d;
  StreamUpdate u;
  while (s.next(u, std::chrono::milliseconds(60000))) {
    const auto ids = ids_of(u, u.tokens);
    d.tokens.insert(d.tokens.end(), ids.begin(), ids.end());
    d.text += u.content;
    if (u.finished) {
      d.last = u;
      break;
    }
  }
  return d;
}

TEST(NgramDrafter, ProposesTheContinuationOfTheLongestRecentMatch) {
  NgramDrafter d(1, 3, 100);
  std::vector<int32_t> out;
  // "1 2 3 4 | 9 2 3 5 | 2 3": the last "2 3" matches twice; the most recent is followed by 5.
  const std::vector<int32_t> ctx{1, 2, 3, 4, 9, 2, 3, 5, 2, 3};
  d.propose(ctx, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 2, 3}));
  // A longer match wins over a more recent shorter one: "9 2 3" occurred once, followed by 5.
  out.clear();
  const std::vector<int32_t> ctx2{9, 2, 3, 7, 7, 1, 2, 3, 8, 9, 2, 3};
  d.propose(ctx2, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 7}));
  out.clear();
  d.propose(std::vector<int32_t>{1, 2, 3}, 4, out);  // no earlier occurrence of any suffix
  EXPECT_TRUE(out.empty());
  // The window bounds the search: the match lies 6 tokens back, beyond a window of 4.
  NgramDrafter near(1, 2, 4);
  near.propose(std::vector<int32_t>{5, 6, 1, 2, 3, 4, 5}, 2, out);
  EXPECT_TRUE(out.empty());
}

TEST(SpecMode, ParsesOffNgramAndDraftAndRefusesTheRest) {
  EXPECT_EQ(parse_spec_mode("off"), SpecMode::kOff);
  EXPECT_EQ(parse_spec_mode("ngram"), SpecMode::kNgram);
  EXPECT_EQ(parse_spec_mode("draft"), SpecMode::kDraft);
  EXPECT_THROW(parse_spec_mode("fast"), Error);
}

// What verification rests on: a pass of [token + guesses] with single_tail computes every row with
// the bits that one-token passes give (the prompt attention kernel differs in the last ones: without
// single_tail some 11600 of these logits differ), on families with sliding windows, sinks, soft-caps
// and K-quants.
TEST(SpecPass, GuessRowsHaveTheBitsOfOneTokenPasses) {
  for (const std::string name : {"models/story-656k", "models/tiny-gemma3-bf16", "models/tiny-gptoss-mxfp4",
                                  "models/tiny-gemma2-f32", "models/gguf/tiny-kq-llama-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    const std::string path = test::shared_dir() + "/" + name;
    auto model = model::Model::load(path, {.threads = 2, .progress = {}});
    const size_t vocab = static_cast<size_t>(model->config().vocab_size);
    auto cache = model->make_cache(256);
    std::vector<int32_t> prompt, run;
    for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<int32_t>((11 + 17 * i) % static_cast<int>(vocab)));
    for (int i = 0; i < 6; ++i) run.push_back(static_cast<int32_t>((5 + 29 * i) % static_cast<int>(vocab)));
    model::KvSequence one(*cache), all(*cache);
    model->forward(one, prompt);
    model->forward(all, prompt);
    std::vector<float> want;
    for (const int32_t t : run) {
      const std::vector<float> row = model->forward(one, std::span<const int32_t>(&t, 1));
      want.insert(want.end(), row.begin(), row.end());
    }
    std::vector<float> got(run.size() * vocab);
    model::ForwardItem item{.seq = &all, .tokens = run, .logits = got.data(), .all_logits = true,
                            .single_tail = static_cast<int64_t>(run.size()) - 1};
    model->forward(std::span<model::ForwardItem>(&item, 1));
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u);
  }
}

sampling::SamplingParams greedy(int n) {
  sampling::SamplingParams p;  // no end token: each run is as long as asked
  p.temperature = 0.0f;
  p.max_new_tokens = n;
  return p;
}

// Greedy with and without guesses, alone and batched, and the cache after rejected guesses.
TEST(SpecGreedy, EqualsPlainOnEveryModelAloneAndBatched) {
  const auto models = test::generating_models();
  ASSERT_GT(models.size(), 20u);
  int64_t taken_somewhere = 0, drafted_somewhere = 0;
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    auto model = model::Model::load(path, {.threads = 2, .progress = {}});
    const auto tok = model::load_tokenizer(path);
    const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
    auto id = [&](int i) { return static_cast<int32_t>((7 + 13 * i) % vocab); };
    // A prompt that repeats itself (guesses are made and often taken) and one that does not; 40 tokens
    // cross LongRoPE's original context (32) of the phi3-longrope model.
    std::vector<int32_t> repeating, plain_prompt;
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 6; ++i) repeating.push_back(id(i));
    for (int i = 0; i < 12; ++i) plain_prompt.push_back(id(100 + 3 * i));
    constexpr int kNew = 40;
    Session plain(*model, tok, 256), spec(*model, tok, 256), adaptive(*model, tok, 256);
    const std::string why = spec.set_speculation(ngram(/*adaptive=*/false));
    adaptive.set_speculation(ngram(/*adaptive=*/true, 8));
    if (!spec_unsupported(model->config()).empty()) {  // a hybrid: refused, and so said
      EXPECT_NE(why.find("recurrent state"), std::string::npos) << why;
      EXPECT_EQ(spec.speculation().mode, SpecMode::kOff);
    }
    for (const auto* prompt : {&repeating, &plain_prompt}) {
      const GenerationResult want = plain.generate(*prompt, greedy(kNew));
      const GenerationResult got = spec.generate(*prompt, greedy(kNew));
      const GenerationResult got_adaptive = adaptive.generate(*prompt, greedy(kNew));
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.text, want.text);
      EXPECT_EQ(got.finish, want.finish);
      EXPECT_EQ(got_adaptive.tokens, want.tokens);
      taken_somewhere += got.accepted;
      drafted_somewhere += got.drafted;
      // The next turn reuses the cache left after rejected guesses, as the plain session reuses its own.
      std::vector<int32_t> next = *prompt;
      next.insert(next.end(), want.tokens.begin(), want.tokens.end());
      next.insert(next.end(), prompt->begin(), prompt->begin() + 5);
      const GenerationResult again = spec.generate(next, greedy(12));
      EXPECT_GE(again.prompt_tokens - again.prefilled_tokens, static_cast<int64_t>(prompt->size()));
      EXPECT_EQ(again.tokens, plain.generate(next, greedy(12)).tokens);
    }

    // Batched: a guessing sequence, the same prompt not guessing, another prompt, then a prompt that
    // reuses a finished one's cached prefix.
    const GenerationResult want = plain.generate(repeating, greedy(kNew));
    const GenerationResult want_other = plain.generate(plain_prompt, greedy(kNew));
    const SchedulerOptions so{.max_parallel = 4, .context = 256, .prefill_chunk = 9, .spec = ngram(/*adaptive=*/false)};
    Scheduler sched(*model, tok, so);
    GenerationRequest a, b, c;
    a.prompt = repeating;
    a.params = greedy(kNew);
    b = a;
    b.speculate = false;
    c.prompt = plain_prompt;
    c.params = greedy(kNew);
    auto sa = sched.submit(a), sb = sched.submit(b), sc = sched.submit(c);
    EXPECT_EQ(drain(*sa).tokens, want.tokens);
    EXPECT_EQ(drain(*sb).tokens, want.tokens);
    EXPECT_EQ(drain(*sc).tokens, want_other.tokens);
    GenerationRequest d;
    d.prompt = repeating;
    d.prompt.insert(d.prompt.end(), want.tokens.begin(), want.tokens.begin() + kNew / 2);
    d.params = greedy(kNew / 2);
    const Drained dd = drain(*sched.submit(d));
    EXPECT_GE(dd.last.cached_tokens, static_cast<int64_t>(repeating.size()));
    EXPECT_EQ(dd.tokens, std::vector<int32_t>(want.tokens.begin() + kNew / 2, want.tokens.end()));
  }
  EXPECT_GT(drafted_somewhere, 0);
  EXPECT_GT(taken_somewhere, 0);  // guesses were taken, not only rejected
}

class SpecChat : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::model_dir("chat-skills");
    model_ = model::Model::load(dir_, {.threads = 2, .progress = {}});
    tok_.emplace(tokenizer::Tokenizer::from_folder(dir_));
    ChatOptions o;
    o.enable_thinking = false;
    // The reply repeats the phrase: runs of guesses copied from the prompt and the reply are taken.
    prompt_ = ChatPromptBuilder(*tok_, dir_)
                  .build(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Say ladder guitar cloud 5 times."}}}), o)
                  .ids;
  }
  GenerationResult run(const sampling::SamplingParams& p, bool speculate, bool adaptive = false) {
    Session s(*model_, *tok_);
    if (speculate) s.set_speculation(spec(adaptive, 6));
    return s.generate(prompt_, p);
  }
  // The fixture's drafter: prompt lookup, or (SpecChatModes) chat-skills' own q4_0 copy as draft model.
  SpecOptions spec(bool adaptive, int64_t max_draft) const {
    SpecOptions o = ngram(adaptive, max_draft);
    if (draft_) {
      o.mode = SpecMode::kDraft;
      o.draft_model = draft_;
    }
    return o;
  }
  std::string dir_;
  std::unique_ptr<model::Model> model_;
  std::optional<tokenizer::Tokenizer> tok_;
  std::vector<int32_t> prompt_;
  std::shared_ptr<model::Model> draft_;
};

// The rules that hold for any drafter, run with prompt lookup and with a draft model.
class SpecChatModes : public SpecChat, public ::testing::WithParamInterface<SpecMode> {
 protected:
  void SetUp() override {
    SpecChat::SetUp();
    if (GetParam() == SpecMode::kDraft)
      draft_ = model::Model::load(dir_, {.threads = 2, .progress = {}, .quantize = kernels::QType::Q4_0});
  }
};
INSTANTIATE_TEST_SUITE_P(Drafters, SpecChatModes, ::testing::Values(SpecMode::kNgram, SpecMode::kDraft),
                         [](const auto& info) { return std::string(spec_mode_name(info.param)); });

// A stop string and an end token met late in the repeated reply, inside a run of taken guesses, end
// the output where plain decoding ends it.
TEST_P(SpecChatModes, StopStringAndEndTokenInsideATakenRunEndWherePlainEnds) {
  const GenerationResult free_run = run(greedy(40), true);
  ASSERT_GT(free_run.accepted, 3) << "the reply should repeat the phrase";
  EXPECT_EQ(free_run.tokens, run(greedy(40), false).tokens);
  ASSERT_GT(free_run.tokens.size(), 8u);
  const size_t at = free_run.tokens.size() - 4;
  const std::string piece = tok_->decode(std::span<const int32_t>(free_run.tokens).subspan(at, 2), false);
  ASSERT_FALSE(piece.empty());
  sampling::SamplingParams with_stop = greedy(40);
  with_stop.stop_strings = {piece};
  const GenerationResult want = run(with_stop, false), got = run(with_stop, true);
  EXPECT_EQ(want.finish, FinishReason::kStopString);
  EXPECT_EQ(got.finish, FinishReason::kStopString);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);

  sampling::SamplingParams with_end = greedy(40);
  with_end.eos_token_ids = {free_run.tokens[at]};
  const GenerationResult want_end = run(with_end, false), got_end = run(with_end, true);
  EXPECT_EQ(want_end.finish, FinishReason::kEos);
  EXPECT_EQ(got_end.finish, FinishReason::kEos);
  EXPECT_EQ(got_end.tokens, want_end.tokens);
  EXPECT_EQ(got_end.text, want_end.text);
}

// A seeded sampler draws once per token from the same logits (bit for bit), so it draws the same
// tokens, with the same log-probabilities.
TEST_F(SpecChat, SeededSamplingAndLogprobsAreTheSame) {
  sampling::SamplingParams p;
  p.do_sample = true;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.seed = 11;
  p.max_new_tokens = 40;
  p.top_logprobs = 3;
  std::vector<GeneratedToken> want_t, got_t;
  Session a(*model_, *tok_), b(*model_, *tok_);
  b.set_speculation(ngram(/*adaptive=*/false, 6));
  GenerationCallbacks ca, cb;
  ca.on_token = [&](const GeneratedToken& t) { want_t.push_back(t); };
  cb.on_token = [&](const GeneratedToken& t) { got_t.push_back(t); };
  const GenerationResult want = a.generate(prompt_, p, ca), got = b.generate(prompt_, p, cb);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_GT(got.drafted, 0);
  ASSERT_EQ(got_t.size(), want_t.size());
  for (size_t i = 0; i < got_t.size(); ++i) {
    ASSERT_TRUE(got_t[i].logprobs && want_t[i].logprobs);
    EXPECT_EQ(got_t[i].logprobs->chosen.logprob, want_t[i].logprobs->chosen.logprob);
    ASSERT_EQ(got_t[i].logprobs->top.size(), want_t[i].logprobs->top.size());
    for (size_t j = 0; j < got_t[i].logprobs->top.size(); ++j)
      EXPECT_EQ(got_t[i].logprobs->top[j].logprob, want_t[i].logprobs->top[j].logprob);
  }
}

// Chat replies with thinking (unlimited, or cut by a budget whose forced tokens end a run of
// guesses) and under a grammar, greedy and (prompt lookup: its seeded draws are plain sampling's)
// sampled: the same reply, reasoning and tokens.
TEST_P(SpecChatModes, ThinkingBudgetsAndGrammarsGiveTheSameReplies) {
  auto params = sampling::from_generation_config(dir_);
  params.max_new_tokens = 80;
  ChatSession plain(*model_, *tok_, dir_), spec(*model_, *tok_, dir_);
  spec.session().set_speculation(this->spec(/*adaptive=*/false, 6));
  const std::vector<uint64_t> seeds = GetParam() == SpecMode::kDraft ? std::vector<uint64_t>{0} : std::vector<uint64_t>{0, 1, 2};
  const GrammarConstraint repeat{
      std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf("root ::= (\"king\" | \"milk\" | \", \")+ \".\"")),
      grammar_vocabulary(*tok_)};
  const auto messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Repeat the phrase king milk 6 times."}}});
  int64_t drafted = 0;
  for (const bool think : {false, true})
    for (const int64_t budget : {int64_t{-1}, int64_t{3}})
      for (const bool constrained : {false, true})
        for (const uint64_t seed : seeds) {
          SCOPED_TRACE(testing::Message() << "think " << think << " budget " << budget << " grammar " << constrained
                                          << " seed " << seed);
          ChatOptions o;
          o.enable_thinking = think;
          o.think_budget = budget;
          if (constrained) o.grammar = repeat;
          params.do_sample = seed != 0;
          params.temperature = seed != 0 ? 0.8f : 0.0f;
          params.seed = seed;
          const ChatReply want = plain.reply(messages, params, o), got = spec.reply(messages, params, o);
          EXPECT_EQ(got.generation.tokens, want.generation.tokens);
          EXPECT_EQ(got.content, want.content);
          EXPECT_EQ(got.reasoning_content, want.reasoning_content);
          EXPECT_EQ(got.thought_forced_closed, want.thought_forced_closed);
          drafted += got.generation.drafted;
        }
  EXPECT_GT(drafted, 0);
}

// Choices of one request (forked after the prompt, each with its own guesses and seed) in a
// speculating Scheduler draw what they draw without speculation; a Session cancelled between a
// pass and its check drops the unchecked guesses, and its next turn equals a plain session's.
TEST_F(SpecChat, ChoicesAndCancellationKeepTheirOutputs) {
  GenerationRequest g;
  g.prompt = prompt_;
  g.params = greedy(40);
  g.params.do_sample = true;
  g.params.temperature = 0.9f;
  g.params.seed = 5;
  std::vector<std::vector<int32_t>> outs[2];
  for (const bool speculate : {false, true}) {
    SchedulerOptions so{.max_parallel = 4, .context = 512};
    if (speculate) so.spec = ngram(/*adaptive=*/false, 6);
    Scheduler sched(*model_, *tok_, so);
    for (auto& stream : sched.submit(g, 3)) outs[speculate].push_back(drain(*stream).tokens);
    if (speculate) {
      EXPECT_GT(sched.stats().spec_drafted, 0);
    }
  }
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_NE(outs[0][0], outs[0][1]);  // the choices did sample on their own

  Session plain(*model_, *tok_), spec(*model_, *tok_);
  spec.set_speculation(ngram(/*adaptive=*/false, 6));
  int polls = 0;
  GenerationCallbacks cb;
  cb.cancelled = [&] { return ++polls > 8; };
  const GenerationResult cut = spec.generate(prompt_, greedy(40), cb);
  EXPECT_EQ(cut.finish, FinishReason::kCancelled);
  std::vector<int32_t> next = prompt_;
  next.insert(next.end(), cut.tokens.begin(), cut.tokens.end());
  EXPECT_EQ(spec.cached_tokens(), next);  // every token fed and checked, no guess
  EXPECT_EQ(spec.generate(next, greedy(20)).tokens, plain.generate(next, greedy(20)).tokens);
}

// Adaptive length: the repeated reply keeps guessing and gains; a story that does not repeat itself
// guesses less than a fixed length does.
TEST_F(SpecChat, AdaptiveLengthFollowsAcceptance) {
  const GenerationResult copying = run(greedy(40), true, /*adaptive=*/true);
  EXPECT_GT(copying.accepted, 3);
  EXPECT_EQ(copying.tokens, run(greedy(40), false).tokens);
  const std::string story = test::model_dir("story-656k");
  auto m = model::Model::load(story, {.threads = 2, .progress = {}});
  const auto tok = tokenizer::Tokenizer::from_folder(story);
  const auto prompt = tok.encode("Once upon a time", true);
  Session fixed(*m, tok), adaptive(*m, tok);
  fixed.set_speculation(ngram(false, 8));
  adaptive.set_speculation(ngram(true, 8));
  const GenerationResult f = fixed.generate(prompt, greedy(120)), a = adaptive.generate(prompt, greedy(120));
  EXPECT_EQ(a.tokens, f.tokens);
  EXPECT_LT(a.drafted, f.drafted);
  std::printf("story: fixed %lld of %lld taken; adaptive %lld of %lld\n", static_cast<long long>(f.accepted),
              static_cast<long long>(f.drafted), static_cast<long long>(a.accepted), static_cast<long long>(a.drafted));
}

// The adaptive length prices each pass by the timings of its own token count, not a line through
// them: where two tokens cost little more than one and three twice as much (the decode kernels
// against the prompt's, a tiny cache-resident model), it guesses one token at a time; where a pass
// of any count costs what one does (the weights read once from memory), as many as pay.
TEST(SpecAdaptive, PricesEachPassByItsOwnTokenCount) {
  SpecOptions o = ngram(/*adaptive=*/true, 8);
  Speculator stepped(o, 64, 100), flat(o, 64, 100);
  for (int i = 0; i < 3; ++i) {
    stepped.timed(1, 1.0);
    stepped.timed(2, 1.1);
    stepped.timed(3, 2.0);
    flat.timed(1, 1.0);
    flat.timed(3, 1.05);
  }
  EXPECT_NEAR(stepped.relative_cost(2), 1.1, 1e-9);
  EXPECT_NEAR(stepped.relative_cost(4), 2.9, 1e-9);  // on past three tokens along 2 -> 3's slope
  EXPECT_EQ(stepped.draft_length(), 1);
  EXPECT_NEAR(flat.relative_cost(2), 1.025, 1e-9);  // between the counts timed
  EXPECT_GT(flat.draft_length(), 3);
  // Nothing timed yet: the options' cost of a further token.
  EXPECT_NEAR(Speculator(o, 64, 100).relative_cost(3), 1.0 + 2 * o.token_cost, 1e-9);
}

}  // namespace
}  // namespace ember::engine
