#pragma once
// The rates `ember generate` and `ember chat -v` report for one generation.
#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/session.h"

namespace ember::app {

// Tokens sampled from a decode step's logits: one per step, plus the guesses a speculative step
// took (the first token comes from the prefill's logits; forced tokens are not sampled).
inline int64_t decode_tokens(const engine::GenerationResult& r) { return r.decode_steps + r.accepted; }

inline double decode_tokens_per_second(const engine::GenerationResult& r) {
  return r.decode_seconds > 0 ? static_cast<double>(decode_tokens(r)) / r.decode_seconds : 0.0;
}

// "; speculation: 40 of 64 guesses taken (62%), 2.1 tokens per step", or "" when nothing was guessed.
inline std::string speculation_note(const engine::GenerationResult& r) {
  if (r.drafted == 0) return "";
  char b[128];
  std::snprintf(b, sizeof b, "; speculation: %lld of %lld guesses taken (%.0f%%), %.2f tokens per step",
                static_cast<long long>(r.accepted), static_cast<long long>(r.drafted),
                100.0 * static_cast<double>(r.accepted) / static_cast<double>(r.drafted),
                r.decode_steps > 0 ? static_cast<double>(decode_tokens(r)) / static_cast<double>(r.decode_steps) : 0.0);
  return b;
}

inline double prefill_tokens_per_second(const engine::GenerationResult& r) {
  return r.prefill_seconds > 0 ? static_cast<double>(r.prefilled_tokens) / r.prefill_seconds : 0.0;
}

}  // namespace ember::app
