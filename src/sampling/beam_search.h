#pragma once
// The model-independent core of Hugging Face beam search (BeamSearchScorer + BeamHypotheses).
// The caller owns the model and the KV caches; each step it hands over one log-probability row per
// live beam and gets back, for each new live beam, its parent (so it can fork that beam's cache) and
// the token to feed next.
//
//   BeamSearch beams(BeamSearch::Options::from(params));
//   while (!beams.done() && steps++ < max_new_tokens) {
//     rows = log_softmax(model(live beams));           // beams.num_live() rows of `vocab`
//     const BeamStep& s = beams.step(rows, vocab);     // new beam i = old beam s.parent[i] + s.token[i]
//   }
//   std::vector<BeamHypothesis> best = beams.finalize();
//
// Semantics as transformers: per step the best 2 * num_beams (more with several EOS ids) candidates
// over all beams, ranked by cumulative log-probability; an EOS candidate ranked within the first
// num_beams becomes a finished hypothesis scored sum_logprobs / generated_len ** length_penalty
// (generated_len counts the EOS); the best num_beams non-EOS candidates live on. early_stopping:
// true stops once num_beams hypotheses are finished; false once no live beam can beat the worst of
// them at the current length; "never" at the best length it could still reach (max_new_tokens when
// length_penalty > 0). Ties rank the lower beam, then the lower token id, first.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sampling/generation_config.h"

namespace ember::sampling {

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated tokens, ending with the EOS id when it finished on one
  double sum_logprobs = 0;
  double score = 0;  // sum_logprobs / tokens.size() ** length_penalty
  bool eos = false;  // ended with an EOS token (else cut by the length limit)
};

struct BeamStep {
  std::vector<int32_t> parent;  // new live beam i continues old live beam parent[i] ...
  std::vector<int32_t> token;   // ... with token[i]
};

class BeamSearch {
 public:
  struct Options {
    int32_t num_beams = 1;
    float length_penalty = 1.0f;
    EarlyStopping early_stopping = EarlyStopping::kFalse;
    int32_t num_return_sequences = 1;
    std::vector<int32_t> eos_token_ids;
    std::optional<int32_t> max_new_tokens;  // needed by "never" with length_penalty > 0
    static Options from(const SamplingParams& p);
  };

  // Throws ember::Error for inconsistent options.
  explicit BeamSearch(Options options);

  // Rows the next step() expects: 1 at the start (all beams share the prompt), then up to num_beams.
  size_t num_live() const { return live_.size(); }
  // Generated tokens and cumulative log-probability of live beam i.
  std::span<const int32_t> live_tokens(size_t i) const { return live_[i].tokens; }
  double live_score(size_t i) const { return live_[i].sum_logprobs; }

  // `logprobs` holds num_live() rows of `vocab` log-probabilities (row i for live beam i).
  const BeamStep& step(std::span<const float> logprobs, size_t vocab);

  // True when no further step can change the result.
  bool done() const { return done_; }

  // The best num_return_sequences hypotheses, best first; live beams count as hypotheses unless
  // the search is done. Call once, at the end.
  std::vector<BeamHypothesis> finalize();

 private:
  struct Beam {
    std::vector<int32_t> tokens;
    double sum_logprobs;
  };
  struct Scored {
    double score;
    int32_t beam, token;
  };
  void add_hypothesis(std::vector<int32_t> tokens, double sum_logprobs, bool eos);
  bool is_done(double best_sum_logprobs, size_t generated_len) const;
  bool is_eos(int32_t token) const;

  Options opt_;
  std::vector<Beam> live_;
  std::vector<BeamHypothesis> finished_;
  double worst_score_ = 1e9;  // as transformers' BeamHypotheses
  bool done_ = false;
  BeamStep step_;
  std::vector<Scored> scored_;
  std::vector<float> heap_;
  std::vector<int32_t> idx_;
};

// out[i] = x[i] - log(sum_j exp(x[j])); out may alias x.
void log_softmax(std::span<const float> x, std::span<float> out);

}  // namespace ember::sampling
