#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ember::kernels {
namespace {

// RMS norm against a long-double reference: row lengths around the 8-wide vector loop (tails), in
// place and out of place, and large values whose squares need the double accumulator.
TEST(RmsNorm, MatchesReferenceForEveryRowLength) {
  std::mt19937 rng(17);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t dim : {1, 7, 8, 9, 33, 256, 1000})
    for (float magnitude : {1.0f, 3e4f}) {
      const int64_t n = 3;
      std::vector<float> x(static_cast<size_t>(n * dim)), w(static_cast<size_t>(dim)), out(x.size());
      for (auto& v : x) v = d(rng) * magnitude;
      for (auto& v : w) v = d(rng);
      rms_norm(x.data(), w.data(), n, dim, 1e-5f, out.data());
      std::vector<float> in_place = x;
      rms_norm(in_place.data(), w.data(), n, dim, 1e-5f, in_place.data());
      EXPECT_EQ(in_place, out) << "dim " << dim;
      for (int64_t t = 0; t < n; ++t) {
        long double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += static_cast<long double>(x[t * dim + i]) * x[t * dim + i];
        const long double inv = 1.0L / std::sqrt(ss / dim + 1e-5L);
        for (int64_t i = 0; i < dim; ++i) {
          const double want = static_cast<double>(x[t * dim + i] * inv * w[i]);
          ASSERT_NEAR(out[t * dim + i], want, 1e-6 * (1 + std::fabs(want))) << "dim " << dim << " row " << t << " i " << i;
        }
      }
    }
}

}  // namespace
}  // namespace ember::kernels
