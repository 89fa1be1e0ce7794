#include "sampling/overrides.h"

namespace ember::sampling {

SamplingParams apply(SamplingParams p, const SamplingOptions& o) {
  if (o.max_tokens) p.max_new_tokens = *o.max_tokens;
  if (o.temperature) {
    p.temperature = *o.temperature;
    p.do_sample = *o.temperature > 0.0f;
  }
  // Any warper turns sampling on, as users of llama.cpp expect (unless a temperature of 0 said no).
  auto warper = [&](auto& field, const auto& option) {
    if (!option) return;
    field = *option;
    p.do_sample = p.do_sample || !o.temperature;
  };
  warper(p.top_k, o.top_k);
  warper(p.top_p, o.top_p);
  warper(p.min_p, o.min_p);
  if (o.repetition_penalty) p.repetition_penalty = *o.repetition_penalty;
  if (o.seed) p.seed = *o.seed;
  p.stop_strings.insert(p.stop_strings.end(), o.stop.begin(), o.stop.end());
  p.validate();
  return p;
}

}  // namespace ember::sampling
