#pragma once
// Beam search on the model: Hugging Face's beam search (sampling/beam_search.h) driven by batched
// forward passes over one KV cache. All beams start from the prompt's cached blocks; a beam that
// continues another forks its block table, so blocks are copied only where beams diverge (the
// partial block each beam writes into). Log-probabilities come from the raw logits, then the
// penalties and logit bias act on them, as transformers' logits processors do in beam search.
#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "sampling/beam_search.h"
#include "sampling/generation_config.h"

namespace ember::engine {

struct BeamGenerateOptions {
  // false: every beam copies all its blocks instead of sharing them (a check on copy-on-write).
  bool share_blocks = true;
  int64_t context_tokens = 0;  // <= 0: the model's max_position_embeddings
};

struct BeamGenerateResult {
  std::vector<sampling::BeamHypothesis> sequences;  // num_return_sequences, best first
  int64_t prompt_tokens = 0;
  int64_t steps = 0;              // batched decode passes
  int64_t peak_cache_blocks = 0;  // most KV blocks in use at once (prompt included)
  double prefill_seconds = 0, decode_seconds = 0;
};

// Runs beam search (params.num_beams beams, params.length_penalty, early_stopping,
// num_return_sequences, eos_token_ids) for at most max_new_tokens (or max_length) new tokens.
// Throws ember::Error for a prompt that does not fit the context, or options beam search does not
// support here: sampling (do_sample with temperature > 0) and stop strings.
BeamGenerateResult beam_generate(model::Model& model, std::span<const int32_t> prompt,
                                 const sampling::SamplingParams& params, const BeamGenerateOptions& options = {});

}  // namespace ember::engine
