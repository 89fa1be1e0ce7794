#pragma once
// The logits processors, each a small function, applied by the Sampler in Hugging Face's order:
//   repetition penalty -> frequency/presence penalty -> logit bias       (on the dense row, by token id)
//   temperature -> top-k -> top-p -> min-p -> typical-p                  (on a candidate list)
// The list processors move the surviving candidates to the front of the span and return how many
// survive; their order is unspecified but deterministic (our own selection code, not the standard
// library's, whose element order differs between implementations). Nothing here allocates: scratch
// buffers belong to the caller (the Sampler) and are reused for every token.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace ember::sampling {

struct Candidate {
  int32_t id;
  float logit;  // after the processors so far (temperature included)
  float p;      // unnormalised probability exp(logit - max logit) where a processor set it
};

// "a ranks before b": higher logit first, lower id among equal logits.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Hugging Face repetition penalty over every distinct token of `context` (prompt + generated):
// positive logits are divided by `penalty`, negative ones multiplied. `seen` is scratch (vocab size,
// all zero on entry and on return).
void apply_repetition_penalty(std::span<float> scores, std::span<const int32_t> context, float penalty,
                              std::vector<uint8_t>& seen);

// OpenAI penalties over the generated tokens only: logit -= count * frequency + (count > 0) * presence.
// `counts` is scratch (vocab size, all zero on entry and on return).
void apply_frequency_presence(std::span<float> scores, std::span<const int32_t> generated, float frequency,
                              float presence, std::vector<int32_t>& counts);

// Throws ember::Error "<what>: token id ID is outside the vocabulary of VOCAB" unless 0 <= id < vocab.
void check_token_id(int32_t id, size_t vocab, const char* what);

// Adds bias[id] to the logit of token id; throws ember::Error for an id outside the vocabulary.
void apply_logit_bias(std::span<float> scores, const std::map<int32_t, float>& bias);

// Divides every logit by t (> 0).
void apply_temperature(std::span<Candidate> c, float t);

// Keeps the k best candidates and every candidate tied with the k-th (as Hugging Face: logit >= k-th).
size_t top_k(std::span<Candidate> c, size_t k);

// Keeps the smallest set of best candidates whose probability reaches top_p (the candidate that crosses
// it included; at least one). The probability mass is relative to `total` (sum of exp(logit - max)
// over the whole current set) when it is given, else to the candidates themselves: the Sampler passes
// it when it has already set aside candidates that provably fall outside or inside. With `total`,
// c[i].p must hold exp(logit - max) for that same max. `above` is the mass of candidates already kept
// that rank before all of c (then none of c need survive).
size_t top_p(std::span<Candidate> c, float top_p, double total = 0, double above = 0);

// Keeps candidates whose probability is at least min_p times the largest one's.
size_t min_p(std::span<Candidate> c, float min_p);

// Locally typical sampling (Meister et al., Hugging Face's TypicalLogitsWarper): ranks candidates by
// |-log p - entropy| and keeps the smallest such prefix whose mass reaches `mass`, plus ties.
size_t typical_p(std::span<Candidate> c, float mass);

// Sets c[i].p = exp(logit - max) and returns their sum.
double exponentiate(std::span<Candidate> c);

}  // namespace ember::sampling
