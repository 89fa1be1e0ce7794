// Each logits processor against distributions worked out by hand, then against the slow reference on
// random rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "base/error.h"
#include "sampling/logits_processors.h"
#include "sampling/sampler.h"
#include "sampling/vec.h"
#include "sampling/reference.h"

namespace ember::sampling {
namespace {

std::vector<Candidate> candidates(const std::vector<float>& logits) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i], 0});
  return c;
}

std::set<int32_t> ids(const std::vector<Candidate>& c, size_t n) {
  std::set<int32_t> s;
  for (size_t i = 0; i < n; ++i) s.insert(c[i].id);
  return s;
}

// Logits whose softmax is exactly 0.1, 0.2, 0.3, 0.4.
std::vector<float> tenths() { return {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)}; }

TEST(Processors, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  std::vector<float> s = {2.0f, -2.0f, 1.0f, 0.5f};
  std::vector<uint8_t> seen(s.size(), 0);
  const std::vector<int32_t> context = {0, 1, 0};  // token 0 twice: penalised once
  apply_repetition_penalty(s, context, 2.0f, seen);
  EXPECT_EQ(s, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f}));
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t v) { return v == 0; }));
  const std::vector<int32_t> bad = {4};
  EXPECT_THROW(apply_repetition_penalty(s, bad, 2.0f, seen), Error);
}

TEST(Processors, FrequencyAndPresenceCountGeneratedTokens) {
  std::vector<float> s = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<int32_t> counts(s.size(), 0);
  const std::vector<int32_t> generated = {2, 2, 3, 2};
  apply_frequency_presence(s, generated, 0.5f, 1.0f, counts);
  EXPECT_FLOAT_EQ(s[0], 1.0f);
  EXPECT_FLOAT_EQ(s[1], 1.0f);
  EXPECT_FLOAT_EQ(s[2], 1.0f - (3 * 0.5f + 1.0f));
  EXPECT_FLOAT_EQ(s[3], 1.0f - (1 * 0.5f + 1.0f));
  EXPECT_TRUE(std::all_of(counts.begin(), counts.end(), [](int32_t v) { return v == 0; }));
}

TEST(Processors, LogitBiasAddsAndChecksIds) {
  std::vector<float> s = {0.0f, 1.0f, 2.0f};
  apply_logit_bias(s, {{0, 5.0f}, {2, -100.0f}});
  EXPECT_EQ(s, (std::vector<float>{5.0f, 1.0f, -98.0f}));
  EXPECT_THROW(apply_logit_bias(s, {{3, 1.0f}}), Error);
}

TEST(Processors, TemperatureSharpens) {
  // logits 0 and ln 2 at T = 0.5: weights 1 and 4 -> 0.2 and 0.8.
  auto c = candidates({0.0f, std::log(2.0f)});
  apply_temperature(c, 0.5f);
  const double z = exponentiate(c);
  EXPECT_NEAR(c[0].p / z, 0.2, 1e-6);
  EXPECT_NEAR(c[1].p / z, 0.8, 1e-6);
}

TEST(Processors, TopKKeepsTiesWithTheKth) {
  auto c = candidates({1.0f, 3.0f, 2.0f, 3.0f, 0.5f});
  EXPECT_EQ(ids(c, top_k(c, 2)), (std::set<int32_t>{1, 3}));
  c = candidates({1.0f, 3.0f, 2.0f, 3.0f, 0.5f});
  EXPECT_EQ(ids(c, top_k(c, 1)), (std::set<int32_t>{1, 3}));  // Hugging Face: logit >= k-th
  c = candidates({1.0f, 3.0f, 2.0f, 3.0f, 0.5f});
  EXPECT_EQ(ids(c, top_k(c, 3)), (std::set<int32_t>{1, 2, 3}));
  EXPECT_EQ(top_k(c, 0), c.size());
}

TEST(Processors, TopPKeepsTheTokenThatCrossesTheMass) {
  // p = 0.4, 0.3, 0.2, 0.1 by rank: 0.35 -> {3}; 0.5 -> {3, 2}; 0.75 -> {3, 2, 1}.
  auto c = candidates(tenths());
  EXPECT_EQ(ids(c, top_p(c, 0.35f)), (std::set<int32_t>{3}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, top_p(c, 0.5f)), (std::set<int32_t>{2, 3}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, top_p(c, 0.75f)), (std::set<int32_t>{1, 2, 3}));
  c = candidates(tenths());
  EXPECT_EQ(top_p(c, 1.0f), c.size());
}

TEST(Processors, MinPScalesByTheTopProbability) {
  // top p = 0.4: min_p 0.6 -> bar 0.24 keeps {0.3, 0.4}; min_p 0.45 -> bar 0.18 keeps three.
  auto c = candidates(tenths());
  EXPECT_EQ(ids(c, min_p(c, 0.6f)), (std::set<int32_t>{2, 3}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, min_p(c, 0.45f)), (std::set<int32_t>{1, 2, 3}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, min_p(c, 1.0f)), (std::set<int32_t>{3}));
}

TEST(Processors, TypicalRanksByDistanceFromEntropy) {
  // H = -sum p ln p = 1.2799; |-ln p - H| = 1.023, 0.330, 0.076, 0.364 for p = 0.1 .. 0.4, so the
  // typical order is token 2 (0.3), 1 (0.2), 3 (0.4), 0 (0.1).
  auto c = candidates(tenths());
  EXPECT_EQ(ids(c, typical_p(c, 0.25f)), (std::set<int32_t>{2}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, typical_p(c, 0.4f)), (std::set<int32_t>{1, 2}));
  c = candidates(tenths());
  EXPECT_EQ(ids(c, typical_p(c, 0.55f)), (std::set<int32_t>{1, 2, 3}));
}

// Random rows of several sizes (past the insertion-sort cut-off, with ties) against the reference.
TEST(Processors, ListProcessorsMatchTheReference) {
  Rng rng(7);
  for (size_t n : {5u, 17u, 100u, 3000u}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = static_cast<float>(std::round(rng.uniform() * 40 - 20) / 4);  // ties
      SamplingParams p;
      p.do_sample = true;
      p.top_k = 0;
      const int which = trial % 4;
      if (which == 0) p.top_k = 1 + static_cast<int32_t>(rng.next() % n);
      if (which == 1) p.top_p = 0.05f + 0.9f * static_cast<float>(rng.uniform());
      if (which == 2) p.min_p = 0.01f + 0.5f * static_cast<float>(rng.uniform());
      if (which == 3) {  // typical: distinct logits so that the reference needs no tie rule
        for (size_t i = 0; i < n; ++i) logits[i] += static_cast<float>(i) * 1e-3f;
        p.typical_p = 0.1f + 0.85f * static_cast<float>(rng.uniform());
      }
      const auto ref = test::reference_distribution(logits, p);
      auto c = candidates(logits);
      size_t kept = c.size();
      if (which == 0) kept = top_k(c, static_cast<size_t>(p.top_k));
      if (which == 1) kept = top_p(c, p.top_p);
      if (which == 2) kept = min_p(c, p.min_p);
      if (which == 3) kept = typical_p(c, p.typical_p);
      std::set<int32_t> expected;
      for (size_t i = 0; i < n; ++i)
        if (ref[i] > 0) expected.insert(static_cast<int32_t>(i));
      EXPECT_EQ(ids(c, kept), expected) << "n=" << n << " trial=" << trial;
    }
  }
}

TEST(Vec, ExpIsAccurate) {
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(vec::exp_det(x) / want, 1.0, 3e-7) << x;
  }
  EXPECT_EQ(vec::exp_det(-INFINITY), 0.0f);
  EXPECT_EQ(vec::exp_det(NAN), 0.0f);
  EXPECT_EQ(vec::exp_det(0.0f), 1.0f);
}

// The vector code must give the scalar definition's bits: lanes i % 8, one reduction order.
TEST(Vec, SumsMirrorTheScalarLaneOrder) {
  Rng rng(3);
  for (size_t n : {1u, 7u, 8u, 9u, 100u, 4097u}) {
    std::vector<float> x(n), out(n);
    for (float& v : x) v = static_cast<float>(rng.uniform() * 30 - 25);
    x[n / 2] = -INFINITY;
    const float t = 0.7f, shift = 3.0f, floor = -10.0f;
    float lanes[8] = {};
    for (size_t i = 0; i < n; ++i) {
      const float e = x[i] >= floor ? vec::exp_det(x[i] / t - shift) : 0.0f;
      lanes[i % 8] += e;
      EXPECT_EQ(vec::sum_exp(std::span<const float>(&x[i], 1), t, shift, floor), e);
    }
    const float want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    EXPECT_EQ(vec::sum_exp(x, t, shift, floor, out), want) << n;
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], x[i] >= floor ? vec::exp_det(x[i] / t - shift) : 0.0f);
  }
}

TEST(Vec, MaxArgmaxKthAndSelection) {
  std::vector<float> x = {1, 5, NAN, 5, -INFINITY, 2, 3, 4, 0, 5, 1, 1};
  EXPECT_EQ(vec::max_value(x), 5.0f);
  EXPECT_EQ(vec::argmax(x), 1);  // lowest id among ties
  std::vector<float> heap;
  EXPECT_EQ(vec::kth_largest(x, 1, heap), 5.0f);
  EXPECT_EQ(vec::kth_largest(x, 4, heap), 4.0f);
  EXPECT_EQ(vec::kth_largest(x, 100, heap), 0.0f);  // fewer finite values than k: the smallest
  std::vector<int32_t> idx(x.size());
  const size_t n = vec::indices_at_least(x, 4.0f, idx.data());
  EXPECT_EQ(std::vector<int32_t>(idx.begin(), idx.begin() + static_cast<ptrdiff_t>(n)),
            (std::vector<int32_t>{1, 3, 7, 9}));
  const std::vector<float> none = {-INFINITY, NAN};
  EXPECT_EQ(vec::argmax(none), -1);
}

}  // namespace
}  // namespace ember::sampling
