#pragma once
// The rates `ember generate` and `ember chat -v` report for one generation.
#include <algorithm>
#include <cstdint>

#include "engine/session.h"

namespace ember::app {

// Tokens sampled from a decode step's logits. The first token comes from the prefill's logits, and
// a last step whose logits no token used (the length limit) produced none.
inline int64_t decode_tokens(const engine::GenerationResult& r) {
  const auto after_first = static_cast<int64_t>(r.tokens.size()) - 1;
  return std::max<int64_t>(0, std::min(r.decode_steps, after_first));
}

inline double decode_tokens_per_second(const engine::GenerationResult& r) {
  return r.decode_seconds > 0 ? static_cast<double>(decode_tokens(r)) / r.decode_seconds : 0.0;
}

inline double prefill_tokens_per_second(const engine::GenerationResult& r) {
  return r.prefill_seconds > 0 ? static_cast<double>(r.prefilled_tokens) / r.prefill_seconds : 0.0;
}

}  // namespace ember::app
