#pragma once
// A slow, obvious reference of the sampling chain (full sorts, double precision) that the fast code is
// checked against, written the way transformers' warpers are described.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sampling/generation_config.h"

namespace ember::sampling::test {

// Probability of every token after the warpers of `p` (penalties not included), 0 for removed ones.
inline std::vector<double> reference_distribution(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(logits[i]) / p.temperature;
  std::vector<bool> keep(n, true);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });

  auto probs = [&] {
    double m = -INFINITY;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) m = std::max(m, x[i]);
    std::vector<double> q(n, 0.0);
    double z = 0;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) z += q[i] = std::exp(x[i] - m);
    for (double& v : q) v /= z;
    return q;
  };
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    const double kth = x[order[p.top_k - 1]];
    for (size_t i = 0; i < n; ++i) keep[i] = keep[i] && x[i] >= kth;
  }
  if (p.top_p < 1) {
    const auto q = probs();
    double above = 0;
    for (size_t i : order) {
      if (!keep[i]) continue;
      if (above >= p.top_p) keep[i] = false;
      above += q[i];
    }
  }
  if (p.min_p > 0) {
    const auto q = probs();
    const double top = *std::max_element(q.begin(), q.end());
    for (size_t i = 0; i < n; ++i) keep[i] = keep[i] && q[i] >= p.min_p * top;
  }
  if (p.typical_p < 1) {
    const auto q = probs();
    double h = 0;
    for (double v : q)
      if (v > 0) h -= v * std::log(v);
    std::vector<size_t> by(order);
    auto key = [&](size_t i) { return std::fabs(-std::log(q[i]) - h); };
    std::sort(by.begin(), by.end(), [&](size_t a, size_t b) {
      if (!keep[a] || !keep[b]) return keep[a] > keep[b];
      return key(a) < key(b) || (key(a) == key(b) && a < b);
    });
    double cum = 0;
    bool reached = false;
    for (size_t i : by) {
      if (!keep[i]) continue;
      if (reached) keep[i] = false;
      cum += q[i];
      if (cum >= p.typical_p) reached = true;
    }
  }
  return probs();
}

}  // namespace ember::sampling::test
