#include "model/router.h"

#include <algorithm>

#include "kernels/ops.h"

namespace ember::model {

void route_tokens(float* logits, int64_t n, int64_t E, int64_t K, bool renormalize, const float* expert_scale,
                  std::vector<std::vector<std::pair<int64_t, float>>>& routed) {
  for (auto& r : routed) r.clear();
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    float* p = logits + t * E;
    kernels::softmax(p, E);
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += p[order[static_cast<size_t>(k)]];
    const float norm = renormalize ? 1.0f / sum : 1.0f;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = order[static_cast<size_t>(k)];
      const float scale = expert_scale != nullptr ? expert_scale[e] : 1.0f;
      routed[static_cast<size_t>(e)].emplace_back(t, p[e] * norm * scale);
    }
  }
}

}  // namespace ember::model
