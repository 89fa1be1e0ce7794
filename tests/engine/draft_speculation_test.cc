// Speculative decoding with a draft model: greedy output equals plain greedy on every generating
// model of ../shared/models (the draft its own q4_0 copy where it loads so), alone and batched beside
// sequences that do not guess; a draft with another vocabulary is refused by the token that differs;
// speculative sampling keeps the target's distribution (chi-square tests on fixed seeds, with their
// power shown against the draft's own distribution).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "base/error.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "engine/speculation.h"
#include "model/load_tokenizer.h"
#include "model/synthetic.h"
#include "sampling/sampler.h"
#include "test_paths.h"

namespace ember::engine {
namespace {

SpecOptions with_draft(std::shared_ptr<model::Model> draft, bool adaptive = false, int64_t max_draft = 4) {
  SpecOptions o;
  o.mode = SpecMode::kDraft;
  o.max_draft = max_draft;
  o.adaptive = adaptive;
  o.draft_model = std::move(draft);
  return o;
}

sampling::SamplingParams greedy(int n) {
  sampling::SamplingParams p;  // no end token: each run is as long as asked
  p.temperature = 0.0f;
  p.max_new_tokens = n;
  return p;
}

std::vector<int32_t> drain(RequestStream& s) {
  std::vector<int32_t> ids;
  StreamUpdate u;
  while (s.next(u, std::chrono::milliseconds(60000))) {
    for (const auto& t : u.tokens) ids.push_back(t.id);
    if (u.finished) break;
  }
  return ids;
}

// The draft a user would take without a smaller sibling: the model's own weights in q4_0 (a file
// whose matrices cannot take it: as stored).
std::shared_ptr<model::Model> own_draft(const std::string& path) {
  try {
    return model::Model::load(path, {.threads = 2, .progress = {}, .quantize = kernels::QType::Q4_0});
  } catch (const Error&) {
    return model::Model::load(path, {.threads = 2, .progress = {}});
  }
}

TEST(SpecDraft, GreedyEqualsPlainOnEveryModelAloneAndBatched) {
  const auto models = test::generating_models();
  ASSERT_GT(models.size(), 20u);
  int64_t taken = 0, rejected = 0;
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    auto model = model::Model::load(path, {.threads = 2, .progress = {}});
    const auto tok = model::load_tokenizer(path);
    const auto draft = own_draft(path);
    const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
    auto id = [&](int i) { return static_cast<int32_t>((7 + 13 * i) % vocab); };
    std::vector<int32_t> prompt;
    for (int i = 0; i < 14; ++i) prompt.push_back(id(3 * i));
    constexpr int kNew = 24;
    Session plain(*model, tok, 256), spec(*model, tok, 256);
    const std::string why = spec.set_speculation(with_draft(draft));
    if (!spec_unsupported(model->config()).empty()) {  // a hybrid: refused, and so said
      EXPECT_NE(why.find("recurrent state"), std::string::npos) << why;
      EXPECT_EQ(spec.speculation().mode, SpecMode::kOff);
      continue;
    }
    ASSERT_EQ(why, "");
    const GenerationResult want = plain.generate(prompt, greedy(kNew));
    const GenerationResult got = spec.generate(prompt, greedy(kNew));
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_GT(got.drafted, 0);
    taken += got.accepted;
    rejected += got.drafted - got.accepted;
    // A second turn: the draft's cache keeps the conversation; the output is still plain greedy's.
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), want.tokens.begin(), want.tokens.end());
    next.insert(next.end(), prompt.begin(), prompt.begin() + 3);
    EXPECT_EQ(spec.generate(next, greedy(8)).tokens, plain.generate(next, greedy(8)).tokens);

    // Batched: two guessing sequences beside one that does not guess. Each prompt is prefilled whole,
    // as the Session does: a prompt cut into chunks (which ones depends on when the requests arrive)
    // has other last bits in its attention, and a random model's near ties then decode otherwise.
    const std::vector<int32_t> other(prompt.rbegin(), prompt.rend());
    const GenerationResult want_other = plain.generate(other, greedy(kNew));
    Scheduler sched(*model, tok, {.max_parallel = 3, .context = 256, .prefill_chunk = 256, .spec = with_draft(draft)});
    GenerationRequest a, b, c;
    a.prompt = prompt;
    a.params = greedy(kNew);
    b = a;
    b.speculate = false;
    c.prompt = other;
    c.params = greedy(kNew);
    auto sa = sched.submit(a), sb = sched.submit(b), sc = sched.submit(c);
    EXPECT_EQ(drain(*sa), want.tokens);
    EXPECT_EQ(drain(*sb), want.tokens);
    EXPECT_EQ(drain(*sc), want_other.tokens);
    EXPECT_GT(sched.stats().spec_drafted, 0);
  }
  // Both ways through verification: guesses taken and guesses refused.
  EXPECT_GT(taken, 0);
  EXPECT_GT(rejected, 0);
}

// The draft itself as draft: every guess is taken (the rows are the one-token passes' bits).
TEST(SpecDraft, TheTargetAsItsOwnDraftTakesEveryGuess) {
  const std::string path = test::shared_path("models", "story-656k");
  std::shared_ptr<model::Model> model = model::Model::load(path, {.threads = 2, .progress = {}});
  const auto tok = model::load_tokenizer(path);
  Session plain(*model, tok, 256), spec(*model, tok, 256);
  ASSERT_EQ(spec.set_speculation(with_draft(model, false, 4)), "");
  const std::vector<int32_t> prompt = tok.encode("Once upon a time, there was a little girl", true);
  const GenerationResult want = plain.generate(prompt, greedy(40));
  const GenerationResult got = spec.generate(prompt, greedy(40));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.accepted, got.drafted);
  EXPECT_GT(got.accepted, 20);
  EXPECT_LT(got.decode_steps, 16);
}

// The adaptive length weighs what a draft model's guess costs against a target pass: a draft as slow
// as the target is not asked for guesses, a cheap one is.
TEST(SpecDraft, AdaptiveLengthCountsTheDraftsCost) {
  struct Timed final : Drafter {
    double seconds = 0;
    void draft(const Generation&, int64_t, Draft&) override {}
    double seconds_per_guess() const override { return seconds; }
  };
  Timed slow, cheap;
  slow.seconds = 0.1;
  cheap.seconds = 0.002;
  SpecOptions o;
  o.mode = SpecMode::kDraft;
  o.max_draft = 8;
  Speculator with_slow(o, 64, 100, &slow), with_cheap(o, 64, 100, &cheap);
  for (Speculator* s : {&with_slow, &with_cheap}) s->timed(1, 0.1);  // a target pass of one token: 0.1 s
  EXPECT_EQ(with_slow.draft_length(), 0);
  EXPECT_GT(with_cheap.draft_length(), 0);
  // Before any timing, the options' estimate (e.g. the ratio of bytes a decode step reads) stands in.
  o.draft_cost = 2.0;
  Timed unmeasured;
  EXPECT_EQ(Speculator(o, 64, 100, &unmeasured).draft_length(), 0);
  o.draft_cost = 0.05;
  EXPECT_GT(Speculator(o, 64, 100, &unmeasured).draft_length(), 0);
}

TEST(SpecDraft, AnotherVocabularyIsRefusedByItsFirstDifferentToken) {
  const auto qwen = model::load_tokenizer(test::shared_path("tokenizers", "qwen3"));
  const auto llama = model::load_tokenizer(test::shared_path("tokenizers", "llama-3.2"));
  int32_t first = 0;  // the byte-level vocabularies share their first ids
  while (qwen.id_to_token(first) == llama.id_to_token(first)) ++first;
  try {
    check_draft_vocabulary(qwen, llama);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("differs from the target's at id " + std::to_string(first) + ": the target has '" +
                     qwen.id_to_token(first) + "', the draft '" + llama.id_to_token(first) + "'"),
              std::string::npos)
        << m;
  }
  // Same tokens but four more: the first one only the target has.
  const auto story = model::load_tokenizer(test::shared_path("models", "story-656k"));
  const auto chat = model::load_tokenizer(test::shared_path("models", "chat-skills"));
  try {
    check_draft_vocabulary(chat, story);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("id " + std::to_string(story.vocab_size())), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_draft_vocabulary(story, story));
}

// Pearson's statistic of observed counts against expected ones (cells with expected >= 5 only; the
// rest pooled into one cell), and its degrees of freedom.
std::pair<double, int> chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
  double stat = 0, rest_o = 0, rest_e = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] < 5) {
      rest_o += observed[i];
      rest_e += expected[i];
      continue;
    }
    stat += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
    ++cells;
  }
  if (rest_e >= 5) {
    stat += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
    ++cells;
  }
  return {stat, cells - 1};
}

// The chi-square distribution's upper 0.1% point for k degrees of freedom (Wilson-Hilferty).
double chi_square_critical(int k) {
  const double z = 3.0902;  // standard normal, upper 0.1%
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Sampler::sample_proposed on fixed logits: the draws follow the target's p, whatever q proposes,
// under every sampler option; and the same counts are far from p when the guess is always kept (the
// test's power: it would see a verification that ignores p).
TEST(SpecSampling, ProposedDrawsFollowTheTargetDistribution) {
  const std::vector<float> target{2.0f, 1.5f, 0.2f, -0.5f, 1.0f, 0.0f, -1.0f, 0.7f, -2.0f, 0.4f};
  const std::vector<float> draft{0.1f, 2.2f, 1.4f, 0.3f, -1.0f, 0.9f, 0.5f, -0.3f, 1.1f, 0.0f};
  struct Case {
    const char* name;
    float temperature, top_p, min_p;
    int top_k;
  };
  for (const Case c : {Case{"t1", 1.0f, 1.0f, 0.0f, 0}, Case{"t0.7 top-k 6", 0.7f, 1.0f, 0.0f, 6},
                       Case{"top-p 0.9", 1.0f, 0.9f, 0.0f, 0}, Case{"min-p 0.1", 1.2f, 1.0f, 0.1f, 0}}) {
    SCOPED_TRACE(c.name);
    sampling::SamplingParams params;
    params.do_sample = true;
    params.temperature = c.temperature;
    params.top_p = c.top_p;
    params.min_p = c.min_p;
    params.top_k = c.top_k;
    params.seed = 7;
    sampling::Sampler exact(params), proposer(params), verifier(params);
    const std::vector<int32_t> context{1};
    std::vector<double> p(target.size()), q(target.size());
    for (const auto& x : exact.distribution(target, context, 1)) p[static_cast<size_t>(x.id)] = x.p;
    const auto qd = proposer.distribution(draft, context, 1);
    const std::vector<sampling::Candidate> qv(qd.begin(), qd.end());
    for (const auto& x : qv) q[static_cast<size_t>(x.id)] = x.p;
    constexpr int kDraws = 20000;
    std::mt19937_64 rng(11);
    std::discrete_distribution<int> from_q(q.begin(), q.end());
    std::vector<double> counts(target.size(), 0.0), kept(target.size(), 0.0), expected(target.size());
    int taken = 0;
    for (int i = 0; i < kDraws; ++i) {
      const int32_t guess = from_q(rng);
      const int32_t t = verifier.sample_proposed(target, context, 1, guess, qv);
      counts[static_cast<size_t>(t)] += 1;
      kept[static_cast<size_t>(guess)] += 1;
      taken += t == guess;
    }
    for (size_t i = 0; i < p.size(); ++i) expected[i] = p[i] * kDraws;
    const auto [stat, dof] = chi_square(counts, expected);
    EXPECT_LT(stat, chi_square_critical(dof)) << "chi-square " << stat << " with " << dof << " degrees of freedom";
    const auto [power, pdof] = chi_square(kept, expected);
    EXPECT_GT(power, 10 * chi_square_critical(pdof)) << "the guesses themselves are not far from p";
    // Kept as often as min(1, p / q) allows: the sum of min(p, q).
    double overlap = 0;
    for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
    EXPECT_NEAR(static_cast<double>(taken) / kDraws, overlap, 0.02);
  }
}

// End to end: story-656k sampled at temperature 1 with a random-weight draft of its shape (a draft
// whose guesses are mostly refused, so the residual draws matter): over many seeds, the token at each
// of the first positions has the same distribution with and without speculation (a two-sample
// chi-square); greedy requests beside them keep plain greedy's output.
TEST(SpecSampling, DraftModelSamplesAsTheTargetAlone) {
  const std::string path = test::shared_path("models", "story-656k");
  auto model = model::Model::load(path, {.threads = 2, .progress = {}});
  const auto tok = model::load_tokenizer(path);
  kernels::ThreadPool pool(1);
  auto weights = model::synthetic_weights(model->config(), DType::F32, 3, pool);
  std::shared_ptr<model::Model> draft = model::Model::from_memory(model->config(), std::move(weights), {.threads = 2, .progress = {}});
  Session plain(*model, tok, 64), spec(*model, tok, 64);
  ASSERT_EQ(spec.set_speculation(with_draft(draft, false, 3)), "");
  const std::vector<int32_t> prompt = tok.encode("Once upon a time, there was a", true);
  constexpr int kNew = 4, kSeeds = 1500;
  std::vector<std::map<int32_t, double>> with(kNew), without(kNew);
  int64_t drafted = 0, accepted = 0;
  for (int s = 0; s < kSeeds; ++s) {
    sampling::SamplingParams p;
    p.do_sample = true;
    p.temperature = 1.0f;
    p.max_new_tokens = kNew;
    p.seed = static_cast<uint64_t>(1000 + s);
    const GenerationResult a = plain.generate(prompt, p);
    p.seed = static_cast<uint64_t>(900000 + s);
    const GenerationResult b = spec.generate(prompt, p);
    ASSERT_EQ(a.tokens.size(), static_cast<size_t>(kNew));
    ASSERT_EQ(b.tokens.size(), static_cast<size_t>(kNew));
    for (int i = 0; i < kNew; ++i) {
      without[static_cast<size_t>(i)][a.tokens[static_cast<size_t>(i)]] += 1;
      with[static_cast<size_t>(i)][b.tokens[static_cast<size_t>(i)]] += 1;
    }
    drafted += b.drafted;
    accepted += b.accepted;
  }
  EXPECT_GT(drafted, kSeeds);
  EXPECT_GT(drafted - accepted, drafted / 2);  // a random draft: most guesses go to the residual
  for (int i = 1; i < kNew; ++i) {  // position 0 comes from the prefill: no guess reaches it
    SCOPED_TRACE("position " + std::to_string(i));
    // Two equal-sized samples: sum (a - b)^2 / (a + b) over tokens seen at least 10 times in all, the rest pooled.
    double stat = 0, rest_a = 0, rest_b = 0;
    int cells = 0;
    std::map<int32_t, double> all = without[static_cast<size_t>(i)];
    for (const auto& [t, n] : with[static_cast<size_t>(i)]) all[t] += 0;
    for (const auto& [t, unused] : all) {
      const double a = without[static_cast<size_t>(i)][t], b = with[static_cast<size_t>(i)][t];
      if (a + b < 10) {
        rest_a += a;
        rest_b += b;
        continue;
      }
      stat += (a - b) * (a - b) / (a + b);
      ++cells;
    }
    if (rest_a + rest_b > 0) {
      stat += (rest_a - rest_b) * (rest_a - rest_b) / (rest_a + rest_b);
      ++cells;
    }
    ASSERT_GT(cells, 5);
    EXPECT_LT(stat, chi_square_critical(cells - 1)) << "chi-square " << stat << " over " << cells << " cells";
  }
  // Greedy beside: the same tokens as plain greedy.
  EXPECT_EQ(spec.generate(prompt, greedy(20)).tokens, plain.generate(prompt, greedy(20)).tokens);
}

}  // namespace
}  // namespace ember::engine
