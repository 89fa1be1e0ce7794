#include "engine/speculation.h"

#include <algorithm>

#include "base/error.h"
#include "model/recurrent_state.h"

namespace ember::engine {

SpecMode parse_spec_mode(const std::string& name) {
  if (name == "off") return SpecMode::kOff;
  if (name == "ngram") return SpecMode::kNgram;
  if (name == "draft")
    throw Error("--spec draft (a draft model) is not implemented yet; use --spec ngram (prompt lookup) or off");
  throw Error("unknown speculation mode '" + name + "' (off, ngram)");
}

const char* spec_mode_name(SpecMode mode) { return mode == SpecMode::kNgram ? "ngram" : "off"; }

std::string spec_unsupported(const model::ModelConfig& config) {
  if (model::RecurrentLayout(config).bytes() > 0)
    return "a hybrid model's recurrent state cannot be rolled back past rejected guesses";
  return "";
}

NgramDrafter::NgramDrafter(int64_t ngram_min, int64_t ngram_max, int64_t window)
    : min_(std::max<int64_t>(1, ngram_min)), max_(std::max(min_, ngram_max)), window_(std::max<int64_t>(2, window)) {}

void NgramDrafter::propose(std::span<const int32_t> context, int64_t k, std::vector<int32_t>& out) {
  const auto len = static_cast<int64_t>(context.size());
  const int64_t lo = std::max<int64_t>(0, len - window_);
  for (int64_t n = std::min(max_, len - 1); n >= min_; --n) {
    const auto suffix = context.subspan(static_cast<size_t>(len - n));
    // The most recent earlier occurrence: its continuation is what the text last did after these n tokens.
    for (int64_t at = len - n - 1; at >= lo; --at) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + at)) continue;
      const int64_t from = at + n, to = std::min(len, from + k);
      out.insert(out.end(), context.begin() + from, context.begin() + to);
      return;
    }
  }
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o) {
  if (o.mode == SpecMode::kNgram) return std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max, o.window);
  return nullptr;
}

Speculator::Speculator(const SpecOptions& options)
    : options_(options), drafter_(make_drafter(options)), cost_(options.token_cost) {
  if (!drafter_) throw Error("internal: a Speculator needs a speculation mode");
}

int64_t Speculator::draft_length() const {
  if (!options_.adaptive) return options_.max_draft;
  if (run_ > 0) return std::min(options_.max_draft, 2 * run_);
  // Tokens a pass yields over what it costs, with each guess taken with probability p_ given the
  // previous one was: (1 + p + ... + p^k) / (1 + cost * k), best k.
  int64_t best = 0;
  double best_rate = 1.0, gained = 1.0, term = 1.0;
  for (int64_t k = 1; k <= options_.max_draft; ++k) {
    term *= p_;
    gained += term;
    const double rate = gained / (1.0 + cost_ * static_cast<double>(k));
    if (rate > best_rate * 1.02) best = k, best_rate = rate;  // a clear gain only
  }
  return best;
}

void Speculator::timed(int64_t tokens, double seconds) {
  constexpr double kWeight = 0.1;
  auto average = [&](double& into, double x) { into = into == 0 ? x : into + kWeight * (x - into); };
  if (tokens <= 1) average(one_, seconds);
  else if (one_ > 0) average(extra_, std::max(0.0, seconds - one_) / static_cast<double>(tokens - 1));
  if (one_ > 0 && extra_ > 0) cost_ = std::clamp(extra_ / one_, 0.01, 4.0);
}

void Speculator::observe(bool agreed) {
  constexpr double kWeight = 0.15;  // about the last dozen guesses
  p_ += kWeight * ((agreed ? 1.0 : 0.0) - p_);
}

const std::vector<int32_t>& Speculator::draft(const Generation& gen, int64_t room) {
  draft_.clear();
  shadow_.clear();
  if (gen.done()) return draft_;
  // A guess taken ends where the length or the context would: none past the token before that.
  room = std::min(room, gen.room() - 1);
  const int64_t k = std::min(draft_length(), room);
  if (k > 0) drafter_->propose(gen.context(), k, draft_);
  else if (room > 0) drafter_->propose(gen.context(), 1, shadow_);
  if (!draft_.empty()) {
    ++counts_.passes;
    counts_.drafted += static_cast<int64_t>(draft_.size());
  }
  return draft_;
}

Verdict Speculator::verify(Generation& gen, std::span<const float> rows, size_t vocab) {
  if (rows.size() != (draft_.size() + 1) * vocab)
    throw Error("internal: a verification pass has " + std::to_string(rows.size() / vocab) + " rows for " +
                std::to_string(draft_.size()) + " guesses");
  Verdict v;
  size_t taken = 0;
  for (;;) {
    GenerationStep s = gen.step(rows.subspan(taken * vocab, vocab));
    // What the guess for this row was: the fed one, or with none fed the drafter's unfed first guess.
    const int32_t* guess = taken < draft_.size() ? &draft_[taken] : taken == 0 && !shadow_.empty() ? &shadow_[0] : nullptr;
    if (guess && !s.tokens.empty()) observe(s.tokens.front().id == *guess);
    // The row after a guess is usable when this step appended exactly that guess and goes on.
    const bool agreed = taken < draft_.size() && !s.finished && s.tokens.size() == 1 && s.feed.size() == 1 &&
                        s.feed[0] == draft_[taken];
    for (GeneratedToken& t : s.tokens) v.step.tokens.push_back(std::move(t));
    v.step.content += s.content;
    v.step.reasoning += s.reasoning;
    v.step.finished = s.finished;
    v.step.feed = std::move(s.feed);
    if (!agreed) break;
    ++taken;
  }
  counts_.accepted += static_cast<int64_t>(taken);
  run_ = !draft_.empty() && taken == draft_.size() ? static_cast<int64_t>(taken) : 0;
  v.rejected = static_cast<int64_t>(draft_.size() - taken);
  draft_.clear();
  shadow_.clear();
  return v;
}

int64_t draft_room(const model::Model& model, const model::KvSequence& seq, int64_t feed, int64_t most) {
  // A pass that recomputes the sequence computes every row as a prompt does: no guesses in it.
  if (model.recompute_length(seq, feed) > 0) return 0;
  int64_t k = std::max<int64_t>(0, most);
  while (k > 0 && model.recompute_length(seq, feed + k) > 0) --k;
  return k;
}

}  // namespace ember::engine
