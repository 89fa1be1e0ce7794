// Beam search core on a hand-written "model": a table of next-token distributions where greedy
// decoding takes a likely first token that leads nowhere, and the best sequence starts lower.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "base/error.h"
#include "sampling/beam_search.h"
#include "sampling/sampler.h"

namespace ember::sampling {
namespace {

enum : int32_t { EOS = 0, A = 1, B = 2, C = 3, kVocab = 4 };

// Next-token probabilities after a generated prefix.
std::vector<double> toy_model(const std::vector<int32_t>& prefix) {
  static const std::map<std::vector<int32_t>, std::vector<double>> table = {
      {{}, {0.0, 0.5, 0.4, 0.1}},         // greedy takes A ...
      {{A}, {0.15, 0.35, 0.3, 0.2}},      // ... where everything is unsure
      {{A, A}, {0.4, 0.2, 0.2, 0.2}},
      {{B}, {0.9, 0.04, 0.03, 0.03}},     // B then EOS: 0.36, the best sequence
      {{C}, {0.5, 0.2, 0.2, 0.1}},
  };
  const auto it = table.find(prefix);
  if (it != table.end()) return it->second;
  return {0.3, 0.25, 0.25, 0.2};
}

std::vector<float> log_row(const std::vector<int32_t>& prefix) {
  std::vector<float> row;
  for (double p : toy_model(prefix)) row.push_back(static_cast<float>(std::log(p)));
  return row;
}

double sequence_logprob(const std::vector<int32_t>& tokens) {
  double s = 0;
  std::vector<int32_t> prefix;
  for (int32_t t : tokens) {
    s += std::log(toy_model(prefix)[t]);
    prefix.push_back(t);
  }
  return s;
}

std::vector<int32_t> greedy(int max_new) {
  Sampler s(SamplingParams{});
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_new) {
    out.push_back(s.sample(log_row(out), out, 0));
    if (out.back() == EOS) break;
  }
  return out;
}

BeamSearch::Options options(int beams) {
  BeamSearch::Options o;
  o.num_beams = beams;
  o.eos_token_ids = {EOS};
  return o;
}

// Drives the search like a generation loop would, checking that parent/token reproduce the beams.
std::vector<BeamHypothesis> run(const BeamSearch::Options& o, int max_new, int* steps = nullptr) {
  BeamSearch search(o);
  std::vector<std::vector<int32_t>> beams = {{}};
  int n = 0;
  for (; n < max_new && !search.done(); ++n) {
    std::vector<float> rows;
    for (size_t i = 0; i < search.num_live(); ++i) {
      EXPECT_EQ(std::vector<int32_t>(search.live_tokens(i).begin(), search.live_tokens(i).end()), beams[i]);
      const auto row = log_row(beams[i]);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    const BeamStep& s = search.step(rows, kVocab);
    std::vector<std::vector<int32_t>> next;
    for (size_t i = 0; i < s.parent.size(); ++i) {
      next.push_back(beams[s.parent[i]]);
      next.back().push_back(s.token[i]);
      EXPECT_NEAR(search.live_score(i), sequence_logprob(next.back()), 1e-5);
    }
    beams = std::move(next);
  }
  if (steps) *steps = n;
  return search.finalize();
}

TEST(BeamSearch, OneBeamIsGreedy) {
  for (int max_new : {1, 2, 3, 6}) {
    const auto hyps = run(options(1), max_new);
    ASSERT_EQ(hyps.size(), 1u);
    EXPECT_EQ(hyps[0].tokens, greedy(max_new)) << max_new;
  }
}

TEST(BeamSearch, FourBeamsFindTheBetterSequence) {
  const int max_new = 6;
  const auto g = greedy(max_new);
  const auto hyps = run(options(4), max_new);
  ASSERT_EQ(hyps.size(), 1u);
  EXPECT_EQ(hyps[0].tokens, (std::vector<int32_t>{B, EOS}));
  EXPECT_TRUE(hyps[0].eos);
  EXPECT_NEAR(hyps[0].sum_logprobs, sequence_logprob(hyps[0].tokens), 1e-5);
  EXPECT_GT(hyps[0].sum_logprobs, sequence_logprob(g));
  EXPECT_NE(hyps[0].tokens, g);
}

TEST(BeamSearch, ScoresUseTheLengthPenalty) {
  for (float lp : {0.0f, 1.0f, 2.0f}) {
    BeamSearch::Options o = options(3);
    o.length_penalty = lp;
    o.num_return_sequences = 3;
    const auto hyps = run(o, 5);
    ASSERT_EQ(hyps.size(), 3u);
    for (size_t i = 0; i < hyps.size(); ++i) {
      const auto& h = hyps[i];
      EXPECT_NEAR(h.score, h.sum_logprobs / std::pow(static_cast<double>(h.tokens.size()), lp), 1e-9);
      if (i > 0) {
        EXPECT_GE(hyps[i - 1].score, h.score);
      }
      EXPECT_EQ(h.eos, !h.tokens.empty() && h.tokens.back() == EOS);
    }
  }
}

TEST(BeamSearch, EarlyStoppingModes) {
  // true: done as soon as num_beams hypotheses finished; "never" runs to the length limit when
  // length_penalty > 0 could still reward longer beams; false sits in between.
  int steps_true = 0, steps_false = 0, steps_never = 0;
  BeamSearch::Options o = options(2);
  o.early_stopping = EarlyStopping::kTrue;
  const auto t = run(o, 20, &steps_true);
  o.early_stopping = EarlyStopping::kFalse;
  const auto f = run(o, 20, &steps_false);
  o.early_stopping = EarlyStopping::kNever;
  o.length_penalty = 1.0f;
  o.max_new_tokens = 20;
  const auto n = run(o, 20, &steps_never);
  EXPECT_LE(steps_true, steps_false);
  EXPECT_LE(steps_false, steps_never);
  EXPECT_LT(steps_true, 20);
  for (const auto* h : {&t, &f, &n}) EXPECT_EQ((*h)[0].tokens, (std::vector<int32_t>{B, EOS}));
  o.max_new_tokens.reset();
  EXPECT_THROW(BeamSearch{o}, Error);
}

TEST(BeamSearch, ChecksItsInput) {
  BeamSearch s(options(2));
  EXPECT_THROW(s.step(std::vector<float>(3), kVocab), Error);  // one row of 4 expected
  BeamSearch::Options o = options(2);
  o.num_return_sequences = 3;
  EXPECT_THROW(BeamSearch{o}, Error);
}

TEST(BeamSearch, LogSoftmaxNormalises) {
  const std::vector<float> x = {1.0f, 2.0f, -INFINITY, 0.5f};
  std::vector<float> out(x.size());
  log_softmax(x, out);
  double z = 0;
  for (float v : out) z += std::exp(static_cast<double>(v));
  EXPECT_NEAR(z, 1.0, 1e-6);
  EXPECT_NEAR(out[1] - out[0], 1.0f, 1e-6);
  EXPECT_EQ(out[2], -INFINITY);
}

}  // namespace
}  // namespace ember::sampling
