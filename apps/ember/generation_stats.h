#pragma once
// The rates `ember generate` and `ember chat -v` report for one generation.
#include <cstdint>

#include "engine/session.h"

namespace ember::app {

// Tokens sampled from a decode step's logits: one per step (the first token comes from the
// prefill's logits; forced tokens are not sampled).
inline int64_t decode_tokens(const engine::GenerationResult& r) { return r.decode_steps; }

inline double decode_tokens_per_second(const engine::GenerationResult& r) {
  return r.decode_seconds > 0 ? static_cast<double>(decode_tokens(r)) / r.decode_seconds : 0.0;
}

inline double prefill_tokens_per_second(const engine::GenerationResult& r) {
  return r.prefill_seconds > 0 ? static_cast<double>(r.prefilled_tokens) / r.prefill_seconds : 0.0;
}

}  // namespace ember::app
