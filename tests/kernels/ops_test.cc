#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ember::kernels {
namespace {

// RMS norm against a long-double reference: row lengths around the 8-wide vector loop (tails), in
// place and out of place, and large values whose squares need the double accumulator.
// Every instruction set; the scalar one is the reference of the others.
TEST(RmsNorm, MatchesReferenceForEveryRowLength) {
  std::mt19937 rng(17);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (Isa isa : supported_isas())
  for (int64_t dim : {1, 7, 8, 9, 33, 256, 1000})
    for (float magnitude : {1.0f, 3e4f}) {
      const int64_t n = 3;
      std::vector<float> x(static_cast<size_t>(n * dim)), w(static_cast<size_t>(dim)), out(x.size());
      for (auto& v : x) v = d(rng) * magnitude;
      for (auto& v : w) v = d(rng);
      rms_norm(x.data(), w.data(), n, dim, 1e-5f, out.data(), isa);
      std::vector<float> in_place = x, scalar(x.size());
      rms_norm(in_place.data(), w.data(), n, dim, 1e-5f, in_place.data(), isa);
      EXPECT_EQ(in_place, out) << isa_name(isa) << " dim " << dim;
      rms_norm(x.data(), w.data(), n, dim, 1e-5f, scalar.data(), Isa::Scalar);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], scalar[i], 1e-6 * (1 + std::fabs(scalar[i]))) << isa_name(isa) << " dim " << dim;
      for (int64_t t = 0; t < n; ++t) {
        long double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += static_cast<long double>(x[t * dim + i]) * x[t * dim + i];
        const long double inv = 1.0L / std::sqrt(ss / dim + 1e-5L);
        for (int64_t i = 0; i < dim; ++i) {
          const double want = static_cast<double>(x[t * dim + i] * inv * w[i]);
          ASSERT_NEAR(out[t * dim + i], want, 1e-6 * (1 + std::fabs(want)))
              << isa_name(isa) << " dim " << dim << " row " << t << " i " << i;
        }
      }
    }
}

// Values spread over exp's whole range (flushed to 0 below -87, saturated above 88), lengths around
// the 8-wide loop: every instruction set gives the scalar reference's bits.
TEST(SiluMul, EveryIsaGivesTheScalarBits) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> d(-100.0f, 100.0f);
  for (int64_t n : {1, 7, 8, 9, 33, 1000}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(gate.size());
    for (auto& v : gate) v = d(rng);
    for (auto& v : up) v = d(rng) / 100.0f;
    std::vector<float> want = gate;
    silu_mul(want.data(), up.data(), n, Isa::Scalar);
    for (int64_t i = 0; i < n; ++i) {
      const float libm = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      ASSERT_NEAR(want[i], libm, 1e-6f * std::fabs(libm) + 1e-30f) << gate[i];
    }
    for (Isa isa : supported_isas()) {
      std::vector<float> got = gate;
      silu_mul(got.data(), up.data(), n, isa);
      EXPECT_EQ(got, want) << isa_name(isa) << " n " << n;
    }
  }
}

// float16 and bfloat16 rows (normal, subnormal, overflowing and infinite values, tails of the
// 8-wide loop) get the scalar conversion's bits from every instruction set.
TEST(StoreRow, EveryIsaGivesTheScalarBits) {
  std::mt19937 rng(23);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t n : {1, 7, 8, 9, 100}) {
    std::vector<float> src(static_cast<size_t>(n));
    for (size_t i = 0; i < src.size(); ++i) {
      const float scales[] = {1.0f, 1e-6f, 7e4f, 1e-3f};
      src[i] = d(rng) * scales[i % 4];
    }
    src[0] = n > 1 ? INFINITY : -0.0f;
    for (DType to : {DType::F16, DType::BF16}) {
      std::vector<uint16_t> want(src.size());
      store_row(src.data(), n, to, want.data(), Isa::Scalar);
      for (Isa isa : supported_isas()) {
        std::vector<uint16_t> got(src.size());
        store_row(src.data(), n, to, got.data(), isa);
        EXPECT_EQ(got, want) << isa_name(isa) << " " << dtype_name(to) << " n " << n;
      }
    }
    std::vector<float> f32(src.size());
    store_row(src.data(), n, DType::F32, f32.data());
    EXPECT_EQ(f32, src);
  }
}


// Partial rotary (Phi-3): the first rot_dim dims of each head rotate as a head of rot_dim would;
// the rest are left as they are.
TEST(RopeRotateHalf, PartialRotaryLeavesTheTailAlone) {
  const int64_t heads = 3, hd = 12, rd = 8;
  std::vector<float> x(heads * hd), cos(rd / 2), sin(rd / 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
  for (int64_t j = 0; j < rd / 2; ++j) {
    cos[j] = std::cos(0.3f * static_cast<float>(j + 1));
    sin[j] = std::sin(0.3f * static_cast<float>(j + 1));
  }
  std::vector<float> partial = x;
  rope_rotate_half(partial.data(), heads, hd, rd, cos.data(), sin.data());
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<float> head(x.begin() + h * hd, x.begin() + h * hd + rd);
    rope_rotate_half(head.data(), 1, rd, cos.data(), sin.data());
    for (int64_t i = 0; i < rd; ++i) EXPECT_EQ(partial[h * hd + i], head[i]) << h << " " << i;
    for (int64_t i = rd; i < hd; ++i) EXPECT_EQ(partial[h * hd + i], x[h * hd + i]) << h << " " << i;
  }
}

// GELU's tanh approximation stays within its known 1e-3 of the exact GELU, x * Phi(x).
TEST(GeluTanhMul, ApproximatesTheExactGelu) {
  std::vector<float> g, up;
  for (float v = -6.0f; v <= 6.0f; v += 0.25f) {
    g.push_back(v);
    up.push_back(2.0f);
  }
  std::vector<float> out = g;
  gelu_tanh_mul(out.data(), up.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double exact = 0.5 * g[i] * (1.0 + std::erf(g[i] / std::sqrt(2.0)));
    EXPECT_NEAR(out[i], 2.0 * exact, 2e-3) << g[i];
  }
}

// gpt-oss's SwiGLU against the formula in double: gate capped above only, up clamped both ways and
// shifted by one, values on both sides of each limit.
TEST(ClampedSwigluMul, ClampsGateAboveAndUpBothWays) {
  const float limit = 7.0f, alpha = 1.702f;
  const std::vector<float> g = {-20.0f, -7.5f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 7.1f, 30.0f};
  const std::vector<float> u = {-30.0f, -7.1f, -1.0f, 0.25f, 1.0f, 6.9f, 7.0f, 7.1f, 30.0f};
  std::vector<float> out = g;
  clamped_swiglu_mul(out.data(), u.data(), static_cast<int64_t>(out.size()), limit, alpha);
  for (size_t i = 0; i < g.size(); ++i) {
    const double gc = std::min<double>(g[i], limit), uc = std::clamp<double>(u[i], -limit, limit);
    const double want = (uc + 1.0) * gc / (1.0 + std::exp(-alpha * gc));
    EXPECT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << "gate " << g[i] << " up " << u[i];
  }
}

TEST(Softcap, BoundsValuesAndKeepsSmallOnes) {
  std::vector<float> x = {-1000.0f, -1.0f, 0.0f, 0.01f, 1000.0f};
  softcap(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  EXPECT_NEAR(x[0], -30.0f, 1e-4);
  EXPECT_NEAR(x[4], 30.0f, 1e-4);
  EXPECT_NEAR(x[3], 0.01f, 1e-6);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_LT(x[1], -0.99f);
}

}  // namespace
}  // namespace ember::kernels
