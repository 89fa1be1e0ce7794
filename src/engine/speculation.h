#pragma once
// Speculative decoding, lossless: a drafter guesses the tokens that follow, the target model scores
// the last token and the guesses in one forward pass (every row's logits), and engine::Generation
// takes each row in order exactly as it would after a pass of one token. A row is used only while the
// token Generation chose equals the guess fed after it; the first disagreement, an end, a stop or a
// forced token ends the run there and the cache drops the positions past it. Every rule (sampling,
// grammar masks, stop strings, end tokens, thinking budgets, logprobs) therefore sees the same logits
// in the same order as without speculation: greedy output is the same token for token.
//
// Guesses without a distribution (prompt lookup; a draft model's under greedy decoding) are checked by
// drawing from the target's logits as without them: a seeded sampler draws the same tokens too. A
// draft model that samples proposes each guess with the distribution q it drew it from, and the
// target keeps it with probability min(1, p / q), else draws from max(0, p - q) (speculative
// sampling): the tokens are distributed as without speculation, with more of them kept.
//
// Session and the Scheduler drive this through one Speculator per sequence; beam search does not.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "model/config.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

enum class SpecMode { kOff, kNgram, kDraft };

// "off", "ngram" or "draft" (the --spec flag). Throws ember::Error otherwise.
SpecMode parse_spec_mode(const std::string& name);
const char* spec_mode_name(SpecMode mode);

struct SpecOptions {
  SpecMode mode = SpecMode::kOff;
  int64_t max_draft = 8;  // tokens guessed per step at most (--spec-max)
  // Prompt lookup: the last n tokens (n from ngram_max down to ngram_min) matched against the
  // `window` most recent tokens of the prompt and the text so far.
  int64_t ngram_min = 1, ngram_max = 4, window = 4096;
  // The draft length follows each sequence's recent acceptance, down to none when guessing does
  // not pay; false: always max_draft (what a guess offers, up to it).
  bool adaptive = true;
  // What one more token costs a pass, relative to a pass of one token: the adaptive length's price
  // until the driver's timings (Speculator::timed) measure it. On CPU a tiny model's pass is
  // compute-bound (chat-skills: about 0.25); a large one's reads the weights once for all its tokens.
  double token_cost = 0.25;
  // kDraft: the draft model (same vocabulary as the target: check_draft_vocabulary), shared by every
  // sequence's drafter; each drafter keeps its own KV cache of it.
  std::shared_ptr<model::Model> draft_model;
  // What a draft model's guess costs relative to a target pass of one token until the driver's
  // timings measure it (draft_speculation: the ratio of the bytes their decode steps read). Counted
  // by the adaptive length.
  double draft_cost = 0;
};

// Why a model cannot speculate, "" when it can: a hybrid's recurrent state (Qwen3-Next, Qwen3.5)
// cannot be rolled back past rejected guesses (KvSequence::truncate goes back to a snapshot or to 0).
// The same holds for a draft model.
std::string spec_unsupported(const model::ModelConfig& config);
// The same for speculation by `options` on a model of `config`: the target's reason, else its draft
// model's.
std::string spec_unsupported(const model::ModelConfig& config, const SpecOptions& options);

// Throws ember::Error unless a draft's tokenizer gives every token the target's id: the same
// vocabulary size and the same token at every id. The message names the first token that differs.
void check_draft_vocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

// Speculation by `draft` for `target` (the engine's defaults otherwise): the vocabularies checked
// (check_draft_vocabulary), a draft that cannot roll back refused, and the draft's cost estimated as
// the ratio of the bytes the two decode steps read. Throws ember::Error naming the draft's path.
SpecOptions draft_speculation(std::shared_ptr<model::Model> draft, const tokenizer::Tokenizer& draft_tokenizer,
                              const model::Model& target, const tokenizer::Tokenizer& target_tokenizer);

// Guesses for one verification pass: the tokens, and where they were sampled, the distribution each
// was drawn from (q[i] for tokens[i], normalised; empty: guesses without one).
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<std::vector<sampling::Candidate>> q;
  void clear() {
    tokens.clear();
    q.clear();
  }
};

// Guesses the tokens that follow a generation's context.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // A generation begins (its options, its seed): called before its first draft().
  virtual void start(const GenerationRequest& /*request*/) {}
  // What a guess has cost lately, in seconds (0: nothing worth counting, as prompt lookup's).
  virtual double seconds_per_guess() const { return 0; }
  // Up to `k` (>= 1) tokens likely to follow gen.context() (prompt and generated so far); fewer or
  // none when it has no guess.
  virtual void draft(const Generation& gen, int64_t k, Draft& out) = 0;
};

// Prompt lookup: the continuation of the most recent earlier occurrence of the longest suffix of the
// context (n tokens, n from ngram_max down to ngram_min) within the last `window` tokens. No memory
// besides the context it is given; O(window * ngram_max) per guess.
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int64_t ngram_min, int64_t ngram_max, int64_t window);
  void draft(const Generation& gen, int64_t k, Draft& out) override { propose(gen.context(), k, out.tokens); }
  void propose(std::span<const int32_t> context, int64_t k, std::vector<int32_t>& out) const;

 private:
  int64_t min_, max_, window_;
};

// A draft model: a smaller model with the target's vocabulary runs ahead on its own KV cache. Each
// draft() brings that cache to the generation's context (keeping the common prefix: a rejected guess
// is rolled back, a new prompt shares what it can), then decodes k tokens one pass each: the argmax
// (greedy requests, after the request's penalties) or a draw from the request's sampler applied to
// the draft's logits, whose distribution goes with the guess.
class ModelDrafter final : public Drafter {
 public:
  // `context`: the most tokens a sequence holds (the draft's cache is sized to it, plus the guesses);
  // `target_vocab`: the target's logits (guesses stay below it).
  ModelDrafter(model::Model& draft, int64_t context, int64_t target_vocab);
  void start(const GenerationRequest& request) override;
  void draft(const Generation& gen, int64_t k, Draft& out) override;
  double seconds_per_guess() const override { return per_guess_; }

 private:
  void catch_up(std::span<const int32_t> context);
  int32_t choose(const Generation& gen, std::span<const int32_t> context, Draft& out);

  model::Model& model_;
  int64_t target_vocab_;
  std::unique_ptr<model::KvCache> cache_;
  model::KvSequence seq_;
  std::vector<int32_t> cached_;  // the tokens in seq_
  std::vector<float> logits_;    // the draft's logits after cached_.back()
  std::vector<int32_t> ahead_;   // context and guesses so far (penalties see the guesses too)
  // The sampler of the generation being drafted for (its options) and the draft's own draws.
  std::optional<sampling::Sampler> sampler_;
  std::optional<sampling::Rng> rng_;
  double per_guess_ = 0;  // a moving average of a draft()'s seconds per guess
};

// The drafter of `options`' mode; `context` bounds a draft model's cache, `target_vocab` its guesses.
std::unique_ptr<Drafter> make_drafter(const SpecOptions& options, int64_t context, int64_t target_vocab);

struct SpecCounts {
  int64_t passes = 0;    // verification passes that fed at least one guess
  int64_t drafted = 0;   // guesses fed
  int64_t accepted = 0;  // guesses the model agreed with (tokens gained)
};

// Positions of a verification pass that `seq` drops afterwards, and what Generation made of it.
struct Verdict {
  GenerationStep step;   // every row's step merged: tokens, text, the end; feed: what to feed next
  int64_t rejected = 0;  // the pass's last positions to drop from the cache (guesses not taken)
};

// What a Speculator's adaptive length has learnt: a driver may hand it to the next generation of the
// same sequence (a Session's next turn), which then starts from it instead of the priors.
struct SpecLearned {
  double p = 0.6;  // recent acceptance of a guessed token
  // Seconds of a pass by its count of tokens (pass[n - 1]; 0: none of n timed yet). Not a line: on a
  // CPU one and two tokens run the decode kernels, three and more the prompt's, which cost a step more.
  std::vector<double> pass;
};

// One sequence's speculation: its drafter, its adaptive draft length and its counts.
class Speculator {
 public:
  // `drafter`: one the driver keeps between generations (a Session's draft model keeps its cache
  // across turns); null: the Speculator makes its own (make_drafter).
  Speculator(const SpecOptions& options, int64_t context, int64_t target_vocab, Drafter* drafter = nullptr,
             const SpecLearned& learned = {});
  const SpecLearned& learned() const { return learned_; }

  // The guesses to feed after the step's feed (already in gen's context): at most `room` of them
  // (what the model's rotation allows; see draft_room), none past gen's length and context limits.
  // Empty: a plain step.
  const std::vector<int32_t>& draft(const Generation& gen, int64_t room);
  // Runs gen over the rows of the pass that fed the last draft(): rows[0] the logits after the last
  // token fed before the guesses, rows[1 + i] after guess i ([1 + guesses][vocab]).
  Verdict verify(Generation& gen, std::span<const float> rows, size_t vocab);

  // A decode pass of `tokens` tokens (guesses included) took `seconds`: what a pass of that many
  // costs is learnt from these (a moving average per count).
  void timed(int64_t tokens, double seconds);

  const SpecCounts& counts() const { return counts_; }
  // The draft length the acceptance estimate (or a run of taken guesses) asks for now (0: not worth guessing).
  int64_t draft_length() const;
  double acceptance() const { return learned_.p; }
  // What a pass of n tokens and its n - 1 guesses (a draft model's passes that made them) cost,
  // relative to a pass of one token: from the timings of the counts nearest n, else the options'
  // token_cost and draft_cost.
  double relative_cost(int64_t n) const;

 private:
  void observe(bool agreed);
  // Seconds of a target pass of n tokens as the timings estimate it (0: none timed yet).
  double pass_seconds(int64_t n) const;

  SpecOptions options_;
  std::unique_ptr<Drafter> own_;
  Drafter* drafter_;
  Draft draft_;
  // With no guess fed (the length at 0), prompt lookup's first guess is still compared with the token
  // chosen next, so that the estimate can recover.
  Draft shadow_;
  bool started_ = false;  // drafter_->start() called for this generation
  SpecLearned learned_;
  // Guesses come in runs (a copied passage): after a pass that took all its k guesses the next may
  // guess 2k, whatever the estimate says; 0 after one that did not.
  int64_t run_ = 0;
  SpecCounts counts_;
};

// Guesses (at most `most`) a pass of `feed` tokens on `seq` may add: none that would make the pass
// cross LongRoPE's original context (rows computed with other rotations than passes of one token
// would use), none in a pass that crosses it anyway (it recomputes every row as a prompt).
int64_t draft_room(const model::Model& model, const model::KvSequence& seq, int64_t feed, int64_t most);

}  // namespace ember::engine
