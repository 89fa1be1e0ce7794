// The continuous-batching scheduler against single-sequence Session::generate: the same greedy tokens
// whatever the batch, the prefill chunk or the prefix reuse; blocks are returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "../engine/chat_skills_eval.h"
#include "base/error.h"
#include "engine/chat_prompt.h"
#include "engine/grammar_constraint.h"
#include "engine/scheduler.h"
#include "engine/session.h"

namespace ember::engine {
namespace {

struct Collected {
  std::string content, reasoning;
  std::vector<int32_t> tokens;
  StreamUpdate last;
};

Collected drain(RequestStream& s) {
  Collected c;
  StreamUpdate u;
  for (;;) {
    if (!s.next(u, std::chrono::milliseconds(60000))) break;
    c.content += u.content;
    c.reasoning += u.reasoning;
    for (const auto& t : u.tokens) c.tokens.push_back(t.id);
    if (u.finished) {
      c.last = u;
      break;
    }
  }
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::model_dir("chat-skills"));
    model_ = model::Model::load(*dir_, {.threads = 2, .progress = {}}).release();
    tok_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_folder(*dir_));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
    delete dir_;
  }
  static sampling::SamplingParams params(int max_new) {
    auto p = sampling::from_generation_config(*dir_);
    sampling::merge_eos(p, model_->config().eos_token_ids);
    p.max_new_tokens = max_new;
    return p;
  }
  static inline std::string* dir_ = nullptr;
  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
};

TEST_F(SchedulerTest, BatchedChunkedGenerationEqualsSession) {
  const auto cases = test::read_jsonl(test::testdata("chat_skills/eval.jsonl"));
  ASSERT_FALSE(cases.empty());
  ChatPromptBuilder prompts(*tok_, *dir_);
  std::vector<ChatPrompt> ps;
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < cases.size(); i += 7) {
    ChatOptions o;
    o.enable_thinking = cases[i]["enable_thinking"].get<bool>();
    ps.push_back(prompts.build(cases[i]["messages"], o));
    Session session(*model_, *tok_);
    expected.push_back(session.generate(ps.back().ids, params(120)).tokens);
  }
  // A small prefill chunk splits prompts over several steps, interleaved with others' decoding.
  for (int64_t chunk : {int64_t{5}, int64_t{256}}) {
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    Scheduler sched(*model_, *tok_, {.max_parallel = 5, .prefill_chunk = chunk});
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : ps) {
      GenerationRequest g;
      g.prompt = p.ids;
      g.params = params(120);
      g.split_reasoning = true;
      g.starts_in_reasoning = p.opens_reasoning;
      streams.push_back(sched.submit(std::move(g)));
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      const Collected c = drain(*streams[i]);
      EXPECT_TRUE(c.last.finished);
      EXPECT_TRUE(c.last.error.empty()) << c.last.error;
      EXPECT_EQ(c.tokens, expected[i]) << "request " << i;
      EXPECT_EQ(c.last.completion_tokens, static_cast<int64_t>(expected[i].size()));
    }
    SchedulerStats s = sched.stats();
    for (int i = 0; i < 200 && s.running > 0; ++i) {  // the gauges follow the last stream's end
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      s = sched.stats();
    }
    EXPECT_EQ(s.requests_finished, static_cast<int64_t>(ps.size()));
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.kv_blocks_held_by_running, 0);
  }
}

// Sequences batched together each follow their own grammar (each Generation keeps its own state).
TEST_F(SchedulerTest, EachSequenceFollowsItsOwnGrammar) {
  const std::vector<std::pair<std::string, std::string>> grammars = {  // GBNF, the same as a regex
      {R"(root ::= ("yes" | "no") ".")", "(yes|no)\\."},
      {"root ::= [0-9]{3}", "[0-9]{3}"},
      {R"(root ::= "a" [b-c]{2,4} " " [a-z]{1,6} "!")", "a[b-c]{2,4} [a-z]{1,6}!"},
      {R"(root ::= "The end.")", "The end\\."}};
  const auto vocab = grammar_vocabulary(*tok_);
  Scheduler sched(*model_, *tok_, {.max_parallel = 4, .prefill_chunk = 8});
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < 2 * grammars.size(); ++i) {
    GenerationRequest g;
    g.prompt = tok_->encode("Once upon a time", true);
    g.params = params(40);
    g.params.do_sample = true;
    g.params.temperature = 1.0f;
    g.params.seed = i;
    g.grammar = GrammarConstraint{std::make_shared<const grammar::Grammar>(
                                      grammar::Grammar::from_gbnf(grammars[i % grammars.size()].first)),
                                  vocab};
    streams.push_back(sched.submit(std::move(g)));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const Collected c = drain(*streams[i]);
    ASSERT_TRUE(c.last.finished);
    EXPECT_TRUE(c.last.error.empty()) << c.last.error;
    EXPECT_EQ(c.last.finish, FinishReason::kEos) << i;
    EXPECT_TRUE(std::regex_match(c.content, std::regex(grammars[i % grammars.size()].second))) << i << ": " << c.content;
  }
}

TEST_F(SchedulerTest, SharedPrefixIsReusedAndAnswersStayTheSame) {
  Scheduler sched(*model_, *tok_, {.max_parallel = 2});
  const auto base = tok_->encode("Once upon a time there was a little girl who liked to play in the park.", true);
  auto ask = [&](std::vector<int32_t> prompt) {
    GenerationRequest g;
    g.prompt = std::move(prompt);
    g.params = params(20);
    return drain(*sched.submit(std::move(g)));
  };
  const Collected first = ask(base);
  std::vector<int32_t> longer = base;
  longer.insert(longer.end(), first.tokens.begin(), first.tokens.end());
  const Collected second = ask(longer);
  EXPECT_GE(second.last.cached_tokens, static_cast<int64_t>(base.size()) - 1);
  Session session(*model_, *tok_);
  EXPECT_EQ(second.tokens, session.generate(longer, params(20)).tokens);
}

// The scheduler's cache stores keys and values as the model was loaded to (it once kept F32).
TEST_F(SchedulerTest, CacheUsesTheModelsKvDtype) {
  auto f16 = model::Model::load(*dir_, {.threads = 2, .progress = {}, .kv_dtype = kernels::KvType::F16});
  Scheduler sched(*f16, *tok_, {.max_parallel = 2});
  EXPECT_EQ(sched.kv_dtype(), kernels::KvType::F16);
  GenerationRequest g;
  g.prompt = tok_->encode("Once upon a time", true);
  g.params = params(24);
  Session session(*f16, *tok_);
  const auto expected = session.generate(g.prompt, g.params).tokens;
  EXPECT_EQ(drain(*sched.submit(std::move(g))).tokens, expected);
}

TEST_F(SchedulerTest, RejectsWhatCannotRunAndCancels) {
  Scheduler sched(*model_, *tok_, {.max_parallel = 1, .context = 64, .max_queue = 1});
  GenerationRequest too_long;
  too_long.prompt.assign(64, 5);
  too_long.params = params(4);
  EXPECT_THROW(sched.submit(std::move(too_long)), Error);
  GenerationRequest empty;
  EXPECT_THROW(sched.submit(std::move(empty)), Error);

  auto endless = [&] {
    GenerationRequest g;
    g.prompt = tok_->encode("Once upon a time", true);
    g.params = params(1000);
    g.params.logit_bias = {{2049, -100.0f}, {2, -100.0f}};
    return g;
  };
  auto running = sched.submit(endless());
  for (int i = 0; i < 500 && sched.stats().running == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto queued = sched.submit(endless());
  bool rejected = false;
  for (int i = 0; i < 100 && !rejected; ++i) {  // the first one may still be queued
    try {
      sched.submit(endless())->cancel();
    } catch (const QueueFull&) {
      rejected = true;
    }
  }
  EXPECT_TRUE(rejected);
  running->cancel();
  queued->cancel();
  // The context limit (64) ends the running one if the cancel comes late (a fast pass, a slow
  // rejection loop); the queued one never runs before its cancel. Either way nothing stays held.
  const FinishReason first = drain(*running).last.finish;
  EXPECT_TRUE(first == FinishReason::kCancelled || first == FinishReason::kContext) << engine::finish_reason_name(first);
  EXPECT_EQ(drain(*queued).last.finish, FinishReason::kCancelled);
  for (int i = 0; i < 200 && sched.stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(sched.stats().kv_blocks_held_by_running, 0);
}

// Choices of one prompt: greedy ones all equal the Session's answer, the blocks come back, and
// choices cancelled before their prompt is in (so never forked) still end; more choices than
// parallel sequences is an error.
TEST_F(SchedulerTest, ChoicesShareThePromptAndEndTogetherWhenCancelled) {
  GenerationRequest g;
  g.prompt = tok_->encode("Once upon a time there was", true);
  g.params = params(16);
  const auto expected = Session(*model_, *tok_).generate(g.prompt, g.params).tokens;
  {
    Scheduler sched(*model_, *tok_, {.max_parallel = 3, .prefill_chunk = 4});
    auto streams = sched.submit(g, 3);
    ASSERT_EQ(streams.size(), 3u);
    for (auto& s : streams) EXPECT_EQ(drain(*s).tokens, expected);
    EXPECT_THROW(sched.submit(g, 4), Error);
    sched.shutdown(false);
    const SchedulerStats st = sched.stats();
    EXPECT_EQ(st.requests_finished, 3);
    EXPECT_LE(st.prefilled_tokens, static_cast<int64_t>(g.prompt.size()));
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.kv_blocks_held_by_running, 0);
  }
  Scheduler sched(*model_, *tok_, {.max_parallel = 3, .prefill_chunk = 1});  // a prompt takes many steps
  auto streams = sched.submit(g, 3);
  for (auto& s : streams) s->cancel();
  for (auto& s : streams) {
    const Collected c = drain(*s);
    EXPECT_TRUE(c.last.finished);
    EXPECT_EQ(c.last.finish, FinishReason::kCancelled);
  }
}

// The newer families, RoPE types, Gemma 4 (KV shared across layers) and gpt-oss (sinks, MXFP4
// experts) through the batched
// scheduler: every golden case's prompt in one
// batch (prompts split over steps and interleaved with others' decoding, LongRoPE sequences crossing
// their original context) gives that case's golden greedy ids, and a longer prompt that reuses a
// finished one's cached prefix (across sliding-window layers too) continues the golden path.
TEST(SchedulerFamilies, BatchedGreedyEqualsGoldenAndPrefixReuseKeepsIt) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const char* folder : {"golden/families", "golden/rope", "golden/gemma4", "golden/gpt-oss"})
    for (const auto& e : fs::directory_iterator(test::testdata(folder)))
      if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const nlohmann::json g = nlohmann::json::parse(std::ifstream(file));
    const std::string dir = test::model_dir(g["model"].get<std::string>());
    auto model = model::Model::load(dir, {.threads = 2, .progress = {}});
    const auto tok = tokenizer::Tokenizer::from_folder(dir);
    auto greedy = [](int n) {
      sampling::SamplingParams p;  // no end-of-sequence stop: the goldens run through it
      p.temperature = 0.0f;
      p.max_new_tokens = n;
      return p;
    };
    Scheduler sched(*model, tok, {.max_parallel = 4, .context = 256, .prefill_chunk = 7});
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& cs : g["cases"]) {
      GenerationRequest r;
      r.prompt = cs["prompt_ids"].get<std::vector<int32_t>>();
      r.params = greedy(static_cast<int>(cs["greedy_ids"].size()));
      streams.push_back(sched.submit(std::move(r)));
    }
    const nlohmann::json* longest = nullptr;
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto& cs = g["cases"][i];
      SCOPED_TRACE(cs["name"].get<std::string>());
      const Collected c = drain(*streams[i]);
      EXPECT_TRUE(c.last.error.empty()) << c.last.error;
      EXPECT_EQ(c.tokens, cs["greedy_ids"].get<std::vector<int32_t>>());
      if (longest == nullptr || cs["prompt_ids"].size() > (*longest)["prompt_ids"].size()) longest = &cs;
    }
    std::vector<int32_t> prompt = (*longest)["prompt_ids"].get<std::vector<int32_t>>();
    const auto path = (*longest)["greedy_ids"].get<std::vector<int32_t>>();
    const size_t half = path.size() / 2;
    const size_t reused_at_least = prompt.size() - 1;
    prompt.insert(prompt.end(), path.begin(), path.begin() + static_cast<std::ptrdiff_t>(half));
    GenerationRequest r;
    r.prompt = prompt;
    r.params = greedy(static_cast<int>(path.size() - half));
    const Collected c = drain(*sched.submit(std::move(r)));
    EXPECT_GE(c.last.cached_tokens, static_cast<int64_t>(reused_at_least));
    EXPECT_EQ(c.tokens, std::vector<int32_t>(path.begin() + static_cast<std::ptrdiff_t>(half), path.end()));
  }
}

}  // namespace
}  // namespace ember::engine
