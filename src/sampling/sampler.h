#pragma once
// Picks the next token from one logit row: penalties and bias, then argmax (greedy) or the warpers of
// logits_processors.h and a draw from our own seeded generator. One Sampler per sequence; it keeps
// its scratch buffers, so after the first token nothing is allocated.
//
// Reproducibility: the generator is xoshiro256** (seeded through splitmix64) and every float reduction
// runs in a fixed order (sampling/vec.h), so the same seed and settings give the same tokens on every
// run, at any thread count, with or without AVX2.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/generation_config.h"
#include "sampling/logits_processors.h"

namespace ember::sampling {

// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // in [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// Log-probabilities from the log-softmax of the raw logits (before any processor), as OpenAI reports.
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_logprobs most likely tokens, best first (lower id on ties)
};

// A token drawn from a normalised distribution (Sampler::distribution()'s) with `rng`.
int32_t draw(std::span<const Candidate> dist, Rng& rng);

class Sampler {
 public:
  // Throws ember::Error when params.validate() does.
  explicit Sampler(SamplingParams params);

  // Returns the next token. `context` is prompt + generated so far; its first n_prompt tokens are the
  // prompt (the repetition penalty sees all of it, frequency/presence only the generated part).
  // Throws ember::Error when a context id is outside the vocabulary or no logit is finite.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context, size_t n_prompt);

  // Speculative sampling (Leviathan et al. 2023): `proposed` was drawn from a draft's distribution q
  // (its distribution(), normalised). Keeps it with probability min(1, p / q), p the distribution
  // sample() draws from; otherwise draws from max(0, p - q) normalised. The token so chosen is
  // distributed as sample()'s. Greedy: sample() (the argmax, whatever was proposed).
  int32_t sample_proposed(std::span<const float> logits, std::span<const int32_t> context, size_t n_prompt,
                          int32_t proposed, std::span<const Candidate> q);

  // The log-probabilities of the last sampled token; null unless params.logprobs or top_logprobs > 0.
  const TokenLogprobs* last_logprobs() const { return want_logprobs_ ? &logprobs_ : nullptr; }

  // The distribution sample() would draw from (same processors, no draw, generator untouched): the
  // surviving candidates with p normalised to sum 1, in no particular order. For greedy decoding, the
  // argmax with p = 1. Valid until the next call.
  std::span<const Candidate> distribution(std::span<const float> logits, std::span<const int32_t> context,
                                          size_t n_prompt);

  const SamplingParams& params() const { return params_; }

 private:
  std::span<const float> apply_penalties(std::span<const float> logits, std::span<const int32_t> context,
                                         size_t n_prompt);
  int32_t greedy(std::span<const float> row) const;
  void set_max(std::span<const float> row);  // max_; throws when no logit is finite
  bool warp(std::span<const float> row);  // true: survivors in cand_[0, n_); false: the whole row
  size_t materialize(std::span<const float> row, float threshold, bool with_p);
  size_t dense_top_p(std::span<const float> row);
  int32_t draw_list();
  double fill_weights(std::span<const float> row);  // weights_ and block_sums_; returns their total
  int32_t draw_weighted(double total);               // a token by weights_ (total: their sum)
  int32_t draw_dense(std::span<const float> row);
  bool nucleus_by_rejection() const;
  int32_t draw_nucleus(std::span<const float> row);
  void compute_logprobs(std::span<const float> logits, int32_t token);

  SamplingParams params_;
  Rng rng_;
  bool want_logprobs_;
  float max_ = 0;  // largest logit of the row being warped

  // Scratch, sized to the vocabulary on first use.
  std::vector<float> scores_;   // penalised copy of the logits
  std::vector<float> weights_;  // exp(logit / T - max / T)
  std::vector<Candidate> cand_;
  std::vector<int32_t> idx_;
  std::vector<uint8_t> seen_;
  std::vector<int32_t> counts_;
  std::vector<float> heap_;
  std::vector<double> block_sums_;
  std::vector<float> q_dense_;  // sample_proposed: the draft's probabilities by id (0 elsewhere)
  size_t n_ = 0;
  bool p_set_ = false;  // cand_[i].p holds exp(logit - max) for the survivors
  TokenLogprobs logprobs_;
};

}  // namespace ember::sampling
