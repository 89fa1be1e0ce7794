// The Sampler end to end: greedy, penalties, the fast dense paths against the slow reference, the
// empirical distribution of many seeded draws against the exact one, determinism, log-probabilities.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "sampling/reference.h"
#include "sampling/sampler.h"

namespace ember::sampling {
namespace {

std::vector<float> random_logits(size_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (float& v : x) {
    // Sum of uniforms: roughly normal, a long-ish top tail like real logits.
    double s = 0;
    for (int i = 0; i < 4; ++i) s += rng.uniform() - 0.5;
    v = static_cast<float>(s * scale);
  }
  return x;
}

SamplingParams sampling(float temperature, int32_t top_k, float top_p, float min_p, uint64_t seed = 1234) {
  SamplingParams p;
  p.do_sample = true;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

struct Case {
  std::string name;
  SamplingParams params;
};

std::vector<Case> warper_cases() {
  return {{"temperature", sampling(0.8f, 0, 1.0f, 0.0f)},
          {"top_k", sampling(1.0f, 40, 1.0f, 0.0f)},
          {"top_p", sampling(0.9f, 0, 0.9f, 0.0f)},
          {"top_p_below_half", sampling(1.1f, 0, 0.3f, 0.0f)},
          {"top_p_min_p", sampling(0.8f, 0, 0.95f, 0.01f)},
          {"min_p", sampling(1.2f, 0, 1.0f, 0.05f)},
          {"top_k_top_p_min_p", sampling(0.7f, 100, 0.8f, 0.02f)}};
}

TEST(Sampler, GreedyTakesTheLowestIdAmongTies) {
  Sampler s(SamplingParams{});
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}, 0), 1);
  SamplingParams zero = sampling(0.0f, 0, 1.0f, 0.0f);  // do_sample with temperature 0 is greedy too
  Sampler z(zero);
  EXPECT_EQ(z.sample(logits, {}, 0), 1);
  const std::vector<float> dead = {-INFINITY, NAN};
  EXPECT_THROW(s.sample(dead, {}, 0), Error);
}

TEST(Sampler, PenaltiesAndBiasChangeTheGreedyPick) {
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  const std::vector<int32_t> context = {0, 1, 1};  // prompt {0}, generated {1, 1}
  SamplingParams rep;
  rep.repetition_penalty = 2.0f;  // 3 -> 1.5, 2 -> 1: token 0 still wins
  EXPECT_EQ(Sampler(rep).sample(logits, context, 1), 0);
  rep.repetition_penalty = 4.0f;  // 3 -> 0.75, 2 -> 0.5, token 2 (1.0) wins
  EXPECT_EQ(Sampler(rep).sample(logits, context, 1), 2);
  SamplingParams freq;
  freq.presence_penalty = 5.0f;  // only generated tokens: token 0 is prompt-only and stays at 3
  EXPECT_EQ(Sampler(freq).sample(logits, context, 1), 0);
  EXPECT_EQ(Sampler(freq).sample(logits, context, 0), 2);  // now token 0 counts as generated
  SamplingParams bias;
  bias.logit_bias = {{3, 3.5f}};
  EXPECT_EQ(Sampler(bias).sample(logits, context, 1), 3);
  EXPECT_THROW(Sampler(bias).sample(logits, context, 4), Error);
}

// The fast paths (dense top-p threshold search, dense min-p cut, heap top-k) over a 151,936 row must
// keep exactly the reference's tokens, with the same probabilities.
TEST(Sampler, DistributionMatchesTheReferenceOnALargeVocabulary) {
  auto cases = warper_cases();
  SamplingParams typical = sampling(1.0f, 0, 1.0f, 0.0f);
  typical.typical_p = 0.7f;
  cases.push_back({"typical", typical});
  for (double scale : {2.0, 8.0}) {
    const auto logits = random_logits(151936, 99, scale);
    for (const Case& c : cases) {
      Sampler s(c.params);
      const auto ref = test::reference_distribution(logits, c.params);
      std::vector<double> got(logits.size(), 0.0);
      for (const Candidate& x : s.distribution(logits, {}, 0)) got[x.id] = x.p;
      size_t mismatched = 0;
      double worst = 0;
      for (size_t i = 0; i < logits.size(); ++i) {
        mismatched += (ref[i] > 0) != (got[i] > 0);
        worst = std::max(worst, std::fabs(ref[i] - got[i]) / std::max(ref[i], 1e-12));
      }
      EXPECT_EQ(mismatched, 0u) << c.name << " scale " << scale;
      EXPECT_LT(worst, 1e-4) << c.name << " scale " << scale;
    }
  }
}

// Many seeded draws against the exact distribution. Bernstein's inequality bounds the frequency f of
// a token of probability p over N draws: P(|f - p| > t) <= 2 exp(-N t^2 / (2 p (1 - p) + 2 t / 3)).
// With the exponent at 30 (odds below 1e-12 per token) that gives the t below. The seed is fixed, so
// the test is deterministic; a distribution off by more than a few 1e-3 cannot pass.
double bernstein_bound(double p, int n) {
  constexpr double kL = 30;
  const double v = p * (1 - p);
  return (2 * kL / 3 + std::sqrt(4 * kL * kL / 9 + 8 * n * v * kL)) / (2.0 * n);
}

TEST(Sampler, EmpiricalDistributionMatchesTheExactOne) {
  constexpr int kDraws = 100000;
  // Spread over several dense-draw blocks, peaked enough that hundreds of tokens matter.
  const auto logits = random_logits(10000, 5, 10.0);
  for (const Case& c : warper_cases()) {
    Sampler s(c.params);
    const auto exact = test::reference_distribution(logits, c.params);
    std::vector<int> hits(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++hits[s.sample(logits, {}, 0)];
    size_t support = 0;
    double total_variation = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      support += exact[i] > 0;
      const double f = static_cast<double>(hits[i]) / kDraws;
      total_variation += std::fabs(f - exact[i]) / 2;
      ASSERT_LE(std::fabs(f - exact[i]), bernstein_bound(exact[i], kDraws))
          << c.name << " token " << i << " p " << exact[i];
      if (exact[i] == 0) {
        ASSERT_EQ(hits[i], 0) << c.name << " drew removed token " << i;
      }
    }
    EXPECT_GT(support, 1u) << c.name;  // the case must actually be random
    // E|f - p| <= sqrt(p / N), so the expected distance is at most sum_i sqrt(p_i / N) / 2.
    double expected = 0;
    for (double p : exact) expected += std::sqrt(p / kDraws) / 2;
    EXPECT_LE(total_variation, 2 * expected) << c.name;
  }
}

// Top-p alone is drawn by rejection (draw from the whole row, keep the draw if it is in the nucleus).
// Rows with many ties put whole groups of equal logits on the nucleus' edge, where only some of a
// group survive (by id) and the float sums cannot decide; removed tokens must never be drawn.
TEST(Sampler, NucleusByRejectionKeepsExactlyTheNucleusWithTies) {
  constexpr int kDraws = 20000;
  auto logits = random_logits(5000, 21, 8.0);
  for (float& x : logits) x = std::round(x * 2) / 2;  // steps of 0.5: hundreds of ties per value
  for (float temperature : {1.0f, 0.7f, 1.3f}) {
    for (float top_p : {0.5f, 0.9f, 0.97f}) {
      const SamplingParams p = sampling(temperature, 0, top_p, 0.0f, 99);
      const auto exact = test::reference_distribution(logits, p);
      Sampler s(p);
      std::vector<int> hits(logits.size(), 0);
      for (int i = 0; i < kDraws; ++i) ++hits[s.sample(logits, {}, 0)];
      for (size_t i = 0; i < logits.size(); ++i) {
        const double f = static_cast<double>(hits[i]) / kDraws;
        if (exact[i] == 0) {
          ASSERT_EQ(hits[i], 0) << "T " << temperature << " top_p " << top_p << " drew removed token " << i;
        }
        ASSERT_LE(std::fabs(f - exact[i]), bernstein_bound(exact[i], kDraws))
            << "T " << temperature << " top_p " << top_p << " token " << i << " p " << exact[i];
      }
    }
  }
}

TEST(Sampler, SameSeedSameTokens) {
  const auto logits = random_logits(151936, 11, 6.0);
  for (const Case& c : warper_cases()) {
    auto run = [&](uint64_t seed) {
      SamplingParams p = c.params;
      p.seed = seed;
      Sampler s(p);
      std::vector<int32_t> out;
      for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits, out, 0));
      return out;
    };
    const auto a = run(42);
    EXPECT_EQ(a, run(42)) << c.name;
    EXPECT_NE(a, run(43)) << c.name;
  }
}

TEST(Sampler, RngIsXoshiroStream) {
  Rng a(1), b(1), c(2);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
  }
  for (int i = 0; i < 1000; ++i) {
    const double u = a.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Sampler, LogprobsComeFromTheRawLogits) {
  SamplingParams p = sampling(0.5f, 2, 1.0f, 0.0f);
  p.repetition_penalty = 3.0f;
  p.top_logprobs = 3;
  Sampler s(p);
  const std::vector<float> logits = {1.0f, 4.0f, 2.0f, 4.0f, -3.0f};
  const std::vector<int32_t> context = {1};
  const int32_t t = s.sample(logits, context, 1);
  const TokenLogprobs* lp = s.last_logprobs();
  ASSERT_NE(lp, nullptr);
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  auto want = [&](int32_t id) { return logits[id] - std::log(z); };
  EXPECT_EQ(lp->chosen.token, t);
  EXPECT_NEAR(lp->chosen.logprob, want(t), 1e-5);
  ASSERT_EQ(lp->top.size(), 3u);
  const int32_t order[] = {1, 3, 2};  // raw order, ties by id; the penalty on token 1 is not applied
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lp->top[i].token, order[i]);
    EXPECT_NEAR(lp->top[i].logprob, want(order[i]), 1e-5);
  }
  EXPECT_EQ(Sampler(SamplingParams{}).last_logprobs(), nullptr);
}

TEST(Sampler, RejectsInvalidParameters) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace ember::sampling
