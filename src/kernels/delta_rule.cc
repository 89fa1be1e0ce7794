#include "kernels/delta_rule.h"

#include <vector>

namespace ember::kernels {

// Two sweeps of S per position, both along value_dim (contiguous, so the compiler vectorises them
// without reordering any sum): decay and S^T k, then the rank-one update and S^T q.
void delta_rule(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n) {
  std::vector<float> u(static_cast<size_t>(dv)), o(static_cast<size_t>(dv));
  for (int64_t t = 0; t < n; ++t) {
    const float* q = h.q + t * h.qk_stride;
    const float* k = h.k + t * h.qk_stride;
    const float* v = h.v + t * h.v_stride;
    const float decay = h.decay[t * h.gate_stride], beta = h.beta[t * h.gate_stride];
    std::fill(u.begin(), u.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv;
      const float ki = k[i];
      for (int64_t j = 0; j < dv; ++j) {
        row[j] *= decay;
        u[static_cast<size_t>(j)] += row[j] * ki;
      }
    }
    for (int64_t j = 0; j < dv; ++j) u[static_cast<size_t>(j)] = beta * (v[j] - u[static_cast<size_t>(j)]);
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv;
      const float ki = k[i], qi = q[i];
      for (int64_t j = 0; j < dv; ++j) {
        row[j] += ki * u[static_cast<size_t>(j)];
        o[static_cast<size_t>(j)] += row[j] * qi;
      }
    }
    std::copy(o.begin(), o.end(), h.out + t * h.out_stride);
  }
}

}  // namespace ember::kernels
