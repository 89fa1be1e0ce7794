#include "model/gated_attention.h"

#include <algorithm>
#include <cmath>

namespace ember::model {

void split_query_gate(const float* qg, int64_t n, int64_t heads, int64_t head_dim, float* q, float* gate) {
  for (int64_t r = 0; r < n * heads; ++r) {
    const float* src = qg + r * 2 * head_dim;
    std::copy_n(src, head_dim, q + r * head_dim);
    std::copy_n(src + head_dim, head_dim, gate + r * head_dim);
  }
}

void apply_output_gate(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

}  // namespace ember::model
