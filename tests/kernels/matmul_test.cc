#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ember::kernels {
namespace {

// Every dtype and awkward shape (tails of the SIMD width, token counts around the 4-token block)
// against the scalar reference.
TEST(Matmul, MatchesReferenceForAllDtypesAndShapes) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t rows : {1, 7, 33})
      for (int64_t cols : {1, 8, 19, 64, 130})
        for (int64_t n : {1, 3, 4, 9}) {
          std::vector<float> wf(rows * cols), x(n * cols), y(n * rows), ref(n * rows);
          std::vector<uint16_t> wh(rows * cols);
          for (auto& v : wf) v = dist(rng);
          for (auto& v : x) v = dist(rng);
          WeightMatrix w{wf.data(), t, rows, cols};
          if (t != DType::F32) {
            for (size_t i = 0; i < wf.size(); ++i) wh[i] = t == DType::F16 ? f32_to_f16(wf[i]) : f32_to_bf16(wf[i]);
            w.data = wh.data();
          }
          matmul(w, x.data(), n, y.data(), pool);
          matmul_reference(w, x.data(), n, ref.data());
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::sqrt(static_cast<float>(cols))))
                << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n;
        }
}

}  // namespace
}  // namespace ember::kernels
