#pragma once
// One conversation's sequence on the model: its KV cache, the tokens the cache holds, and the
// generation loop. Each new prompt reuses the longest prefix already cached and prefills only the
// rest, so a multi-turn chat never recomputes its history.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/speculation.h"
#include "model/model.h"
#include "sampling/generation_config.h"
#include "tokenizer/tokenizer.h"

namespace ember::engine {

struct GenerationCallbacks {
  // Answer text that is final (whole UTF-8 characters, never part of a stop string), as soon as it is.
  std::function<void(std::string_view text)> on_text;
  // Reasoning text, when the request splits it off (GenerationRequest::split_reasoning).
  std::function<void(std::string_view text)> on_reasoning;
  // Every token appended to the sequence (sampled or forced), with its log-probabilities if asked.
  std::function<void(const GeneratedToken& token)> on_token;
  // Polled between steps; true stops generation (FinishReason::kCancelled).
  std::function<bool()> cancelled;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the end-of-sequence id included if one ended it
  std::string text;             // all answer text passed to on_text
  std::string reasoning;        // all reasoning text passed to on_reasoning
  FinishReason finish = FinishReason::kLength;
  bool thought_forced_closed = false;  // a thinking budget closed the thought
  int64_t prompt_tokens = 0;
  int64_t prefilled_tokens = 0;  // prompt tokens that were not already cached
  double prefill_seconds = 0, decode_seconds = 0;
  // Forward passes after the prefill. The first generated token comes from the prefill's logits, so
  // a decode rate is (decode_steps + accepted) / decode_seconds.
  int64_t decode_steps = 0;
  // Speculation: guesses fed to the model, and those it agreed with (tokens gained over one per step).
  int64_t drafted = 0, accepted = 0;
};

class Session {
 public:
  // context_tokens <= 0: the model's max_position_embeddings (engine::resolve_context).
  Session(model::Model& model, const tokenizer::Tokenizer& tokenizer, int64_t context_tokens = 0);

  int64_t context() const { return context_; }
  const std::vector<int32_t>& cached_tokens() const { return cached_; }

  // Makes the cache hold exactly `prompt`, keeping the longest common prefix with what it holds.
  // Returns the number of tokens computed. Throws ember::Error if the prompt exceeds the context.
  int64_t prefill(std::span<const int32_t> prompt);

  // Prefills the request's prompt, then runs engine::Generation until it ends (an end token, a stop
  // string, max_new_tokens, the context limit or cancellation). The generated tokens stay in the
  // cache for the next turn.
  GenerationResult generate(GenerationRequest request, const GenerationCallbacks& callbacks = {});
  // The same for a plain prompt and options.
  GenerationResult generate(std::span<const int32_t> prompt, const sampling::SamplingParams& params,
                            const GenerationCallbacks& callbacks = {});

  // Speculative decoding for the generations that follow (engine/speculation.h; off by default).
  // Returns why this model cannot speculate ("" when it can), and speculation then stays off.
  std::string set_speculation(const SpecOptions& options);
  const SpecOptions& speculation() const { return spec_; }

  void reset();
  // Snapshots of a hybrid model's recurrent state each sequence keeps (model::KvCache::set_snapshot_limit;
  // 0: a turn whose prompt departs from the cache recomputes from its first token).
  void set_state_snapshots(int64_t n) { cache_->set_snapshot_limit(n); }

 private:
  model::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  int64_t context_;
  std::unique_ptr<model::KvCache> cache_;
  model::KvSequence seq_;
  std::vector<int32_t> cached_;  // the tokens whose keys and values are in seq_
  std::vector<float> logits_;    // logits after the last cached token
  SpecOptions spec_;
  std::unique_ptr<Drafter> drafter_;  // with speculation on
  SpecLearned spec_learned_;  // what the adaptive length learnt in the last generation
};

}  // namespace ember::engine
