#pragma once
// Speculative decoding, lossless: a drafter guesses the tokens that follow, the target model scores
// the last token and the guesses in one forward pass (every row's logits), and engine::Generation
// takes each row in order exactly as it would after a pass of one token. A row is used only while the
// token Generation chose equals the guess fed after it; the first disagreement, an end, a stop or a
// forced token ends the run there and the cache drops the positions past it. Every rule (sampling,
// grammar masks, stop strings, end tokens, thinking budgets, logprobs) therefore sees the same logits
// in the same order as without speculation: greedy output is the same token for token, and a seeded
// sampler draws the same tokens too (one draw per token, from the same logits).
//
// Session and the Scheduler drive this through one Speculator per sequence; beam search does not.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "model/config.h"
#include "model/model.h"

namespace ember::engine {

enum class SpecMode { kOff, kNgram };

// "off" or "ngram" (the --spec flag); "draft" (a draft model) is refused as not implemented yet.
// Throws ember::Error otherwise.
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
};

// Why a model cannot speculate, "" when it can: a hybrid's recurrent state (Qwen3-Next, Qwen3.5)
// cannot be rolled back past rejected guesses (KvSequence::truncate goes back to a snapshot or to 0).
std::string spec_unsupported(const model::ModelConfig& config);

// Guesses the tokens that follow a context. The interface a draft model will implement too.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `k` (>= 1) tokens likely to follow `context` (prompt and generated so far); fewer or none
  // when it has no guess.
  virtual void propose(std::span<const int32_t> context, int64_t k, std::vector<int32_t>& out) = 0;
};

// Prompt lookup: the continuation of the most recent earlier occurrence of the longest suffix of the
// context (n tokens, n from ngram_max down to ngram_min) within the last `window` tokens. No memory
// besides the context it is given; O(window * ngram_max) per guess.
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int64_t ngram_min, int64_t ngram_max, int64_t window);
  void propose(std::span<const int32_t> context, int64_t k, std::vector<int32_t>& out) override;

 private:
  int64_t min_, max_, window_;
};

std::unique_ptr<Drafter> make_drafter(const SpecOptions& options);

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

// One sequence's speculation: its drafter, its adaptive draft length and its counts.
class Speculator {
 public:
  explicit Speculator(const SpecOptions& options);

  // The guesses to feed after the step's feed (already in gen's context): at most `room` of them
  // (what the model's rotation allows; see draft_room), none past gen's length and context limits.
  // Empty: a plain step.
  const std::vector<int32_t>& draft(const Generation& gen, int64_t room);
  // Runs gen over the rows of the pass that fed the last draft(): rows[0] the logits after the last
  // token fed before the guesses, rows[1 + i] after guess i ([1 + guesses][vocab]).
  Verdict verify(Generation& gen, std::span<const float> rows, size_t vocab);

  // A decode pass of `tokens` tokens (guesses included) took `seconds`: the cost of a guess is learnt
  // from these (a moving average of one-token passes and of what each further token adds).
  void timed(int64_t tokens, double seconds);

  const SpecCounts& counts() const { return counts_; }
  double token_cost() const { return cost_; }
  // The draft length the acceptance estimate (or a run of taken guesses) asks for now (0: not worth guessing).
  int64_t draft_length() const;
  double acceptance() const { return p_; }

 private:
  void observe(bool agreed);

  SpecOptions options_;
  std::unique_ptr<Drafter> drafter_;
  std::vector<int32_t> draft_;
  // With no guess fed (the length at 0), the drafter's first guess is still compared with the token
  // chosen next, for free, so that the estimate can recover.
  std::vector<int32_t> shadow_;
  double p_ = 0.6;  // recent acceptance of a guessed token
  // Guesses come in runs (a copied passage): after a pass that took all its k guesses the next may
  // guess 2k, whatever the estimate says; 0 after one that did not.
  int64_t run_ = 0;
  double cost_;      // options_.token_cost, then as measured
  double one_ = 0, extra_ = 0;  // seconds of a one-token pass, and per further token (0: not measured)
  SpecCounts counts_;
};

// Guesses (at most `most`) a pass of `feed` tokens on `seq` may add: none that would make the pass
// cross LongRoPE's original context (rows computed with other rotations than passes of one token
// would use), none in a pass that crosses it anyway (it recomputes every row as a prompt).
int64_t draft_room(const model::Model& model, const model::KvSequence& seq, int64_t feed, int64_t most);

}  // namespace ember::engine
