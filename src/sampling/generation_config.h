#pragma once
// Every decoding option of one request, and how a model folder's generation_config.json fills it.
//
// Defaults are Hugging Face GenerationConfig's: do_sample=false (greedy), temperature 1.0, top_k 50,
// top_p 1.0, typical_p 1.0, repetition_penalty 1.0, num_beams 1. The rule Ember follows, like
// transformers: the "warpers" (temperature, top_k, top_p, min_p, typical_p) act only when do_sample is
// true and temperature > 0; otherwise the token is the argmax. The penalties and logit_bias act in both
// cases (they change which token is the argmax). A caller that lets the user set a temperature > 0 on
// a model whose generation_config says nothing about do_sample should set do_sample itself.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ember::sampling {

// Hugging Face's early_stopping: true, false or "never".
enum class EarlyStopping { kFalse, kTrue, kNever };

struct SamplingParams {
  bool do_sample = false;
  float temperature = 1.0f;  // 0 means greedy
  int32_t top_k = 50;        // 0 disables
  float top_p = 1.0f;        // 1 disables
  float min_p = 0.0f;        // 0 disables
  float typical_p = 1.0f;    // 1 disables

  float repetition_penalty = 1.0f;  // HF: over prompt + output; divides positive, multiplies negative logits
  float frequency_penalty = 0.0f;   // OpenAI: minus count * f, counts over generated tokens only
  float presence_penalty = 0.0f;    // OpenAI: minus p once per token present in generated tokens
  std::map<int32_t, float> logit_bias;  // added to the logit of the token

  std::optional<uint64_t> seed;  // absent: seeded from std::random_device

  std::optional<int32_t> max_new_tokens;
  std::optional<int32_t> max_length;  // prompt + generated, as generation_config's max_length
  std::vector<int32_t> eos_token_ids;
  std::vector<std::string> stop_strings;

  int32_t num_beams = 1;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int32_t num_return_sequences = 1;

  bool logprobs = false;     // report the chosen token's log-probability
  int32_t top_logprobs = 0;  // and this many most likely alternatives

  // True when sample() draws at random instead of taking the argmax.
  bool sampling() const { return do_sample && temperature > 0.0f; }

  // Throws ember::Error naming the first out-of-range option; with the model's vocabulary size (> 0)
  // also for a logit_bias token id outside it.
  void validate(size_t vocab_size = 0) const;
};

// Reads <model_dir>/generation_config.json over the defaults. A missing file gives the defaults;
// a field of the wrong type throws ember::Error naming the file and the field. Unknown fields are ignored.
SamplingParams from_generation_config(const std::string& model_dir);

// Appends the ids of `more` (e.g. config.json's eos_token_id) that `params` does not list yet,
// keeping generation_config.json's ids first.
void merge_eos(SamplingParams& params, std::span<const int32_t> more);

}  // namespace ember::sampling
