#include "engine/speculation.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "base/clock.h"
#include "base/error.h"
#include "model/recurrent_state.h"

namespace ember::engine {

namespace {
// Exponential moving average of timings: the first sample as it is (0: none yet), then `weight` of each new one.
void average(double& into, double x, double weight = 0.1) { into = into == 0 ? x : into + weight * (x - into); }
}  // namespace

SpecMode parse_spec_mode(const std::string& name) {
  if (name == "off") return SpecMode::kOff;
  if (name == "ngram") return SpecMode::kNgram;
  if (name == "draft") return SpecMode::kDraft;
  throw Error("unknown speculation mode '" + name + "' (off, ngram, draft)");
}

const char* spec_mode_name(SpecMode mode) {
  return mode == SpecMode::kNgram ? "ngram" : mode == SpecMode::kDraft ? "draft" : "off";
}

std::string spec_unsupported(const model::ModelConfig& config) {
  if (model::RecurrentLayout(config).bytes() > 0)
    return "a hybrid model's recurrent state cannot be rolled back past rejected guesses";
  return "";
}

std::string spec_unsupported(const model::ModelConfig& config, const SpecOptions& options) {
  if (options.mode == SpecMode::kOff) return "";
  if (std::string why = spec_unsupported(config); !why.empty()) return why;
  if (!options.draft_model) return "";
  const std::string why = spec_unsupported(options.draft_model->config());
  return why.empty() ? why : "the draft model: " + why;
}

void check_draft_vocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  const int32_t n = std::min(target.vocab_size(), draft.vocab_size());
  auto token = [](const tokenizer::Tokenizer& t, int32_t id) -> std::optional<std::string> {
    try {
      return t.id_to_token(id);
    } catch (const Error&) {
      return std::nullopt;  // an id the vocabulary skips
    }
  };
  auto shown = [](const std::optional<std::string>& t) { return t ? "'" + *t + "'" : std::string("no token"); };
  for (int32_t id = 0; id < n; ++id) {
    const auto a = token(target, id), b = token(draft, id);
    if (a != b)
      throw Error("the draft model's tokenizer differs from the target's at id " + std::to_string(id) + ": the target has " +
                  shown(a) + ", the draft " + shown(b) + " (a draft model needs the target's vocabulary)");
  }
  if (target.vocab_size() != draft.vocab_size())
    throw Error("the draft model's tokenizer has " + std::to_string(draft.vocab_size()) + " tokens and the target's " +
                std::to_string(target.vocab_size()) + "; the first token only one has is id " + std::to_string(n) +
                " (a draft model needs the target's vocabulary)");
}

SpecOptions draft_speculation(std::shared_ptr<model::Model> draft, const tokenizer::Tokenizer& draft_tokenizer,
                              const model::Model& target, const tokenizer::Tokenizer& target_tokenizer) {
  try {
    if (const std::string why = spec_unsupported(draft->config()); !why.empty()) throw Error(why);
    check_draft_vocabulary(target_tokenizer, draft_tokenizer);
  } catch (const Error& e) {
    throw Error("draft model " + draft->dir() + ": " + e.what());
  }
  SpecOptions o;
  o.mode = SpecMode::kDraft;
  // Decode is bound by the bytes a step reads: the draft's share of the target's, until measured.
  o.draft_cost = static_cast<double>(draft->decode_weight_bytes()) / static_cast<double>(target.decode_weight_bytes());
  o.draft_model = std::move(draft);
  return o;
}

NgramDrafter::NgramDrafter(int64_t ngram_min, int64_t ngram_max, int64_t window)
    : min_(std::max<int64_t>(1, ngram_min)), max_(std::max(min_, ngram_max)), window_(std::max<int64_t>(2, window)) {}

void NgramDrafter::propose(std::span<const int32_t> context, int64_t k, std::vector<int32_t>& out) const {
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

ModelDrafter::ModelDrafter(model::Model& draft, int64_t context, int64_t target_vocab)
    : model_(draft),
      target_vocab_(target_vocab),
      // Room for the guesses past the context: a pass may guess up to the context's end.
      cache_(draft.make_cache(context + 64)),
      seq_(*cache_) {}

// The draft's cache holds `context` but its last token, which is run again for its logits unless
// they are those of the last pass.
void ModelDrafter::catch_up(std::span<const int32_t> context) {
  size_t keep = 0;
  while (keep < cached_.size() && keep < context.size() && cached_[keep] == context[keep]) ++keep;
  if (keep == context.size() && keep == cached_.size() && !logits_.empty()) return;
  keep = std::min(keep, context.size() - 1);
  seq_.truncate(static_cast<int64_t>(keep));
  keep = static_cast<size_t>(seq_.length());  // a cut may go back further (never for the models a draft may be)
  cached_.resize(keep);
  logits_ = model_.forward(seq_, context.subspan(keep));
  cached_.assign(context.begin(), context.end());
}

int32_t ModelDrafter::choose(const Generation& gen, std::span<const int32_t> context, Draft& out) {
  // Only ids the target has (a draft's padded vocabulary may be wider).
  const auto row = std::span<const float>(logits_).first(std::min(logits_.size(), static_cast<size_t>(target_vocab_)));
  const size_t n_prompt = gen.request().prompt.size();
  if (!gen.request().params.sampling()) return sampler_->sample(row, context, n_prompt);
  const std::span<const sampling::Candidate> q = sampler_->distribution(row, context, n_prompt);
  out.q.emplace_back(q.begin(), q.end());
  return sampling::draw(q, *rng_);  // the draft's own draws (start(): the request's seed, moved)
}

void ModelDrafter::start(const GenerationRequest& request) {
  sampling::SamplingParams params = request.params;
  params.logprobs = false;
  params.top_logprobs = 0;
  sampler_.emplace(params);
  // The draft's draws are its own: the request's seed, moved off the target's, so a seed still
  // makes the whole generation reproducible.
  rng_.emplace(params.seed ? *params.seed ^ 0x9E3779B97F4A7C15ULL : std::random_device{}());
}

void ModelDrafter::draft(const Generation& gen, int64_t k, Draft& out) {
  const std::span<const int32_t> context = gen.context();
  k = std::min<int64_t>(k, cache_->capacity_tokens() - static_cast<int64_t>(context.size()));
  if (k <= 0 || context.empty()) return;
  if (!sampler_) throw Error("internal: a draft model drafted before start()");
  const auto t0 = std::chrono::steady_clock::now();
  catch_up(context);
  ahead_.assign(context.begin(), context.end());
  for (int64_t i = 0; i < k; ++i) {
    const int32_t t = choose(gen, ahead_, out);
    out.tokens.push_back(t);
    ahead_.push_back(t);
    if (i + 1 == k) break;
    const int32_t one[1] = {t};
    logits_ = model_.forward(seq_, one);
    cached_.push_back(t);
  }
  // The draft's logits are now after its second-to-last guess: the next catch_up runs again from
  // the first token the target did not take (or from the context's end).
  logits_.clear();
  average(per_guess_, seconds_since(t0) / static_cast<double>(k));
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, int64_t context, int64_t target_vocab) {
  if (o.mode == SpecMode::kNgram) return std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max, o.window);
  if (o.mode == SpecMode::kDraft) {
    if (!o.draft_model) throw Error("internal: --spec draft without a draft model");
    return std::make_unique<ModelDrafter>(*o.draft_model, context, target_vocab);
  }
  return nullptr;
}

Speculator::Speculator(const SpecOptions& options, int64_t context, int64_t target_vocab, Drafter* drafter,
                       const SpecLearned& learned)
    : options_(options),
      own_(drafter ? nullptr : make_drafter(options, context, target_vocab)),
      drafter_(drafter ? drafter : own_.get()),
      learned_(learned) {
  if (!drafter_) throw Error("internal: a Speculator needs a speculation mode");
}

int64_t Speculator::draft_length() const {
  if (!options_.adaptive) return options_.max_draft;
  auto pays = [&](double gained, int64_t k) { return gained / relative_cost(k + 1) > 1.02; };
  // After a pass that took all its guesses, the next guesses twice as many, if a run that long pays.
  if (run_ > 0) {
    const int64_t k = std::min(options_.max_draft, 2 * run_);
    if (pays(static_cast<double>(k + 1), k)) return k;
  }
  // Tokens a pass yields over what it costs, with each guess taken with probability learned_.p given the
  // previous one was: (1 + p + ... + p^k) / relative_cost(k + 1), best k; a clear gain only.
  int64_t best = 0;
  double best_rate = 1.02, gained = 1.0, term = 1.0;
  for (int64_t k = 1; k <= options_.max_draft; ++k) {
    term *= learned_.p;
    gained += term;
    const double rate = gained / relative_cost(k + 1);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

double Speculator::pass_seconds(int64_t n) const {
  const auto& t = learned_.pass;
  const int64_t size = static_cast<int64_t>(t.size());
  // The first timed count from m on, stepping by d (0: none).
  auto next_timed = [&](int64_t m, int64_t d) {
    for (; m >= 1 && m <= size; m += d)
      if (t[m - 1] > 0) return m;
    return int64_t{0};
  };
  if (n <= size && t[n - 1] > 0) return t[n - 1];
  auto line = [&](int64_t a, int64_t b) {  // through the timings of a < b, at n (never below the smaller)
    const double slope = (t[b - 1] - t[a - 1]) / static_cast<double>(b - a);
    return std::max(std::min(t[a - 1], t[b - 1]), t[a - 1] + slope * static_cast<double>(n - a));
  };
  const int64_t lo = next_timed(std::min(n - 1, size), -1), hi = next_timed(n + 1, 1);
  if (lo && hi) return line(lo, hi);
  if (!lo && !hi) return 0;
  // Timed counts on one side only: the line through its two nearest, or from one the options' cost
  // of a further token.
  const int64_t near = lo ? lo : hi, second = lo ? next_timed(lo - 1, -1) : next_timed(hi + 1, 1);
  if (second) return line(std::min(near, second), std::max(near, second));
  const double c = options_.token_cost;
  return t[near - 1] * (1.0 + c * static_cast<double>(n - 1)) / (1.0 + c * static_cast<double>(near - 1));
}

double Speculator::relative_cost(int64_t n) const {
  const double one = pass_seconds(1), guesses = static_cast<double>(n - 1);
  const double target = one > 0 ? pass_seconds(n) / one : 1.0 + options_.token_cost * guesses;
  const double guess = drafter_->seconds_per_guess();
  return target + guesses * (guess > 0 && one > 0 ? guess / one : options_.draft_cost);
}

void Speculator::timed(int64_t tokens, double seconds) {
  if (tokens < 1) return;
  auto& t = learned_.pass;
  if (static_cast<int64_t>(t.size()) < tokens) t.resize(static_cast<size_t>(tokens), 0.0);
  // A fifth of each new timing: the first passes after a prompt (cold caches) fade within a few.
  average(t[static_cast<size_t>(tokens - 1)], seconds, 0.2);
}

void Speculator::observe(bool agreed) {
  constexpr double kWeight = 0.15;  // about the last dozen guesses
  learned_.p += kWeight * ((agreed ? 1.0 : 0.0) - learned_.p);
}

const std::vector<int32_t>& Speculator::draft(const Generation& gen, int64_t room) {
  draft_.clear();
  shadow_.clear();
  if (gen.done()) return draft_.tokens;
  if (!started_) {
    drafter_->start(gen.request());
    started_ = true;
  }
  // A guess taken ends where the length or the context would: none past the token before that.
  room = std::min(room, gen.room() - 1);
  const int64_t k = std::min(draft_length(), room);
  if (k > 0) {
    drafter_->draft(gen, k, draft_);
  } else if (room > 0 && options_.mode != SpecMode::kDraft) {
    // Prompt lookup's guess is free: it keeps the estimate alive with the length at 0. A draft
    // model's is not (its cache must take every token since its last pass: a prefill of the whole
    // text, as costly as drafting it), so a draft that stopped paying stays off.
    drafter_->draft(gen, 1, shadow_);
  }
  if (!draft_.tokens.empty()) {
    ++counts_.passes;
    counts_.drafted += static_cast<int64_t>(draft_.tokens.size());
  }
  return draft_.tokens;
}

Verdict Speculator::verify(Generation& gen, std::span<const float> rows, size_t vocab) {
  const std::vector<int32_t>& guesses = draft_.tokens;
  if (rows.size() != (guesses.size() + 1) * vocab)
    throw Error("internal: a verification pass has " + std::to_string(rows.size() / vocab) + " rows for " +
                std::to_string(guesses.size()) + " guesses");
  Verdict v;
  size_t taken = 0;
  for (;;) {
    const std::span<const float> row = rows.subspan(taken * vocab, vocab);
    // A guess drawn from the draft's distribution is kept or replaced by speculative sampling.
    GenerationStep s = taken < draft_.q.size() ? gen.step(row, guesses[taken], draft_.q[taken]) : gen.step(row);
    // What the guess for this row was: the fed one, or with none fed the drafter's unfed first guess.
    const int32_t* guess = taken < guesses.size()                    ? &guesses[taken]
                           : taken == 0 && !shadow_.tokens.empty() ? &shadow_.tokens[0]
                                                                   : nullptr;
    if (guess && !s.tokens.empty()) observe(s.tokens.front().id == *guess);
    // The row after a guess is usable when this step appended exactly that guess and goes on.
    const bool agreed = taken < guesses.size() && !s.finished && s.tokens.size() == 1 && s.feed.size() == 1 &&
                        s.feed[0] == guesses[taken];
    for (GeneratedToken& t : s.tokens) v.step.tokens.push_back(std::move(t));
    v.step.content += s.content;
    v.step.reasoning += s.reasoning;
    v.step.finished = s.finished;
    v.step.feed = std::move(s.feed);
    if (!agreed) break;
    ++taken;
  }
  counts_.accepted += static_cast<int64_t>(taken);
  run_ = !guesses.empty() && taken == guesses.size() ? static_cast<int64_t>(taken) : 0;
  v.rejected = static_cast<int64_t>(guesses.size() - taken);
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
