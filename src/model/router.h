#pragma once
// A mixture of experts' choice for each token of a batch: a softmax over its router logits, its top
// k experts (the lower index on a tie), their weights renormalised to sum 1 where asked and scaled
// per expert where given (Gemma 4's router.per_expert_scale).
#include <cstdint>
#include <utility>
#include <vector>

namespace ember::model {

// logits: [n][E], turned into probabilities in place. routed[e] receives (token, weight) for every
// token that chose expert e, in token order (routed holds E lists, cleared first). expert_scale: E
// factors, or null.
void route_tokens(float* logits, int64_t n, int64_t E, int64_t K, bool renormalize, const float* expert_scale,
                  std::vector<std::vector<std::pair<int64_t, float>>>& routed);

}  // namespace ember::model
