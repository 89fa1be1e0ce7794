#pragma once
// The decoding options a person sets, over the model's own generation_config.json. Unset fields keep
// the model's defaults. As llama.cpp's users expect, a top-k, top-p or min-p turns sampling on
// unless the temperature is set to 0; a temperature above 0 samples.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember {

struct SamplingOptions {
  std::optional<int32_t> max_tokens;  // unset: the rest of the context (the CLI's chat: 1024)
  std::optional<float> temperature;   // 0: greedy
  std::optional<int32_t> top_k;       // 0: off
  std::optional<float> top_p, min_p;
  std::optional<float> repetition_penalty;  // Hugging Face semantics; 1: off
  std::optional<uint64_t> seed;             // unset: random
  std::vector<std::string> stop;            // stop strings, never shown

  // True when a field that switches sampling on is set (a temperature above 0, top-k, top-p, min-p).
  bool any_warper() const { return (temperature && *temperature > 0.0f) || top_k || top_p || min_p; }
};

}  // namespace ember
