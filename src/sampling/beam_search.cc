#include "sampling/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"
#include "sampling/vec.h"

namespace ember::sampling {

BeamSearch::Options BeamSearch::Options::from(const SamplingParams& p) {
  Options o;
  o.num_beams = p.num_beams;
  o.length_penalty = p.length_penalty;
  o.early_stopping = p.early_stopping;
  o.num_return_sequences = p.num_return_sequences;
  o.eos_token_ids = p.eos_token_ids;
  o.max_new_tokens = p.max_new_tokens;
  return o;
}

BeamSearch::BeamSearch(Options options) : opt_(std::move(options)) {
  if (opt_.num_beams < 1) fail("beam search", "num_beams must be >= 1");
  if (opt_.num_return_sequences < 1 || opt_.num_return_sequences > opt_.num_beams)
    fail("beam search", "num_return_sequences must be in [1, num_beams]");
  if (opt_.early_stopping == EarlyStopping::kNever && opt_.length_penalty > 0 &&
      (!opt_.max_new_tokens || *opt_.max_new_tokens < 1))
    fail("beam search", "early_stopping \"never\" with length_penalty > 0 needs max_new_tokens");
  live_.push_back(Beam{{}, 0.0});
}

bool BeamSearch::is_eos(int32_t token) const {
  return std::find(opt_.eos_token_ids.begin(), opt_.eos_token_ids.end(), token) != opt_.eos_token_ids.end();
}

void BeamSearch::add_hypothesis(std::vector<int32_t> tokens, double sum_logprobs, bool eos) {
  const double len = static_cast<double>(std::max<size_t>(1, tokens.size()));
  const double score = sum_logprobs / std::pow(len, static_cast<double>(opt_.length_penalty));
  const auto capacity = static_cast<size_t>(opt_.num_beams);
  if (finished_.size() >= capacity && score <= worst_score_) return;
  finished_.push_back(BeamHypothesis{std::move(tokens), sum_logprobs, score, eos});
  if (finished_.size() <= capacity) {
    worst_score_ = std::min(score, worst_score_);
    return;
  }
  // Over capacity: drop the worst (the first one among equals), the next worst becomes the bar.
  size_t worst = 0;
  for (size_t i = 1; i < finished_.size(); ++i)
    if (finished_[i].score < finished_[worst].score) worst = i;
  finished_.erase(finished_.begin() + static_cast<ptrdiff_t>(worst));
  worst_score_ = finished_[0].score;
  for (const BeamHypothesis& h : finished_) worst_score_ = std::min(worst_score_, h.score);
}

bool BeamSearch::is_done(double best_sum_logprobs, size_t generated_len) const {
  if (finished_.size() < static_cast<size_t>(opt_.num_beams)) return false;
  if (opt_.early_stopping == EarlyStopping::kTrue) return true;
  double len = static_cast<double>(generated_len);
  if (opt_.early_stopping == EarlyStopping::kNever && opt_.length_penalty > 0)
    len = static_cast<double>(*opt_.max_new_tokens);
  const double best_attainable = best_sum_logprobs / std::pow(len, static_cast<double>(opt_.length_penalty));
  return worst_score_ >= best_attainable;
}

const BeamStep& BeamSearch::step(std::span<const float> logprobs, size_t vocab) {
  if (done_) fail("beam search", "step() after the search is done");
  if (vocab == 0 || logprobs.size() != live_.size() * vocab)
    fail("beam search", "expected " + std::to_string(live_.size()) + " rows of " + std::to_string(vocab) +
                            " log-probabilities, got " + std::to_string(logprobs.size()) + " values");
  const auto beams = static_cast<size_t>(opt_.num_beams);
  const size_t keep = std::max<size_t>(2, 1 + opt_.eos_token_ids.size()) * beams;

  // The best `keep` of all beams are among the best `keep` of each row.
  scored_.clear();
  idx_.resize(vocab);
  for (size_t b = 0; b < live_.size(); ++b) {
    const std::span<const float> row = logprobs.subspan(b * vocab, vocab);
    const float kth = vec::kth_largest(row, std::min(keep, vocab), heap_);
    if (kth == -std::numeric_limits<float>::infinity()) continue;
    const size_t n = vec::indices_at_least(row, kth, idx_.data());
    for (size_t i = 0; i < n; ++i)
      scored_.push_back(Scored{live_[b].sum_logprobs + row[idx_[i]], static_cast<int32_t>(b), idx_[i]});
  }
  std::sort(scored_.begin(), scored_.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
  });
  if (scored_.size() > keep) scored_.resize(keep);
  if (scored_.empty()) fail("beam search", "no finite log-probability in any row");

  const size_t generated_len = live_[0].tokens.size() + 1;
  std::vector<Beam> next;
  next.reserve(beams);
  step_.parent.clear();
  step_.token.clear();
  for (size_t rank = 0; rank < scored_.size() && next.size() < beams; ++rank) {
    const Scored& c = scored_[rank];
    std::vector<int32_t> tokens = live_[c.beam].tokens;
    tokens.push_back(c.token);
    if (is_eos(c.token)) {
      // An EOS ranked below the first num_beams candidates does not finish a hypothesis.
      if (rank < beams) add_hypothesis(std::move(tokens), c.score, true);
      continue;
    }
    next.push_back(Beam{std::move(tokens), c.score});
    step_.parent.push_back(c.beam);
    step_.token.push_back(c.token);
  }
  live_ = std::move(next);
  done_ = live_.empty() || is_done(scored_[0].score, generated_len);
  return step_;
}

std::vector<BeamHypothesis> BeamSearch::finalize() {
  if (!done_)
    for (Beam& b : live_) add_hypothesis(std::move(b.tokens), b.sum_logprobs, false);
  live_.clear();
  done_ = true;
  // transformers sorts ascending (stable) and pops from the end: among equal scores the later wins.
  std::stable_sort(finished_.begin(), finished_.end(),
                   [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score < b.score; });
  std::vector<BeamHypothesis> out;
  for (int32_t i = 0; i < opt_.num_return_sequences && !finished_.empty(); ++i) {
    out.push_back(std::move(finished_.back()));
    finished_.pop_back();
  }
  return out;
}

void log_softmax(std::span<const float> x, std::span<float> out) {
  if (out.size() != x.size()) fail("log_softmax", "output size differs from input size");
  const float m = vec::max_value(x);
  if (m == -std::numeric_limits<float>::infinity()) fail("log_softmax", "no finite value");
  const auto lse = static_cast<float>(m + std::log(static_cast<double>(vec::sum_exp(x, 1.0f, m))));
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - lse;
}

}  // namespace ember::sampling
