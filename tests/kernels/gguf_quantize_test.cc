// ggml's reference quantizers (quantize_row_ref): each type's blocks dequantize within the error its
// format allows, and on random rows no worse in RMS than a naive round-to-nearest in the same format
// (the bit-for-bit comparison with llama-quantize's files is tests/model/quant_mix_test.cc's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gguf_quants.h"

namespace ember::kernels {
namespace {

constexpr GgmlType kRefTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Rows of a weight-like distribution: Gaussian, a few outliers, some all-positive blocks, a zero block.
std::vector<float> random_rows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng);
  for (int64_t i = 0; i < n; i += 97) x[static_cast<size_t>(i)] *= 8.0f;  // outliers
  for (int64_t i = 512; i < std::min<int64_t>(n, 768); ++i) x[static_cast<size_t>(i)] = std::fabs(x[static_cast<size_t>(i)]) + 0.01f;
  for (int64_t i = 1024; i < std::min<int64_t>(n, 1280); ++i) x[static_cast<size_t>(i)] = 0.0f;
  return x;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> blocks(static_cast<size_t>(ggml_row_bytes(t, n)));
  quantize_row_ref(t, x.data(), n, blocks.data());
  std::vector<float> back(x.size());
  dequantize_row(t, blocks.data(), n, back.data());
  return back;
}

// The largest error a block's format allows for a weight: half a step for the 32-weight types (a whole
// step for Q4_0 / Q5_0, whose top code is one short of the negated extreme), plus the float16 rounding
// of scale and min; the K-quants, whose fitted scales may clip, one step of their super-block's range
// at the type's bits.
float bound(GgmlType t, const float* x, int64_t block) {
  float lo = 0.0f, hi = 0.0f, amax = 0.0f;
  for (int64_t i = 0; i < block; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]), amax = std::max(amax, std::fabs(x[i]));
  const float slack = 1e-3f * amax + 1e-12f;
  switch (t) {
    case GgmlType::Q8_0: return 0.5f * amax / 127.0f + slack;
    case GgmlType::Q4_0: return amax / 8.0f + slack;
    case GgmlType::Q5_0: return amax / 16.0f + slack;
    case GgmlType::Q5_1: return 0.5f * (hi - lo) / 31.0f + slack;
    case GgmlType::Q4_K: return (hi - lo) / 15.0f + slack;
    case GgmlType::Q5_K: return (hi - lo) / 31.0f + slack;
    default: return 2.0f * amax / 63.0f + slack;  // Q6_K
  }
}

TEST(GgmlReferenceQuantize, EveryWeightWithinItsFormatsBound) {
  const std::vector<float> x = random_rows(4096, 1);
  for (GgmlType t : kRefTypes) {
    const std::vector<float> back = round_trip(t, x);
    const int64_t block = ggml_type_info(t).block_size;
    for (int64_t b = 0; b < static_cast<int64_t>(x.size()) / block; ++b) {
      const float* xb = x.data() + b * block;
      const float e = bound(t, xb, block);
      for (int64_t i = 0; i < block; ++i)
        ASSERT_LE(std::fabs(back[static_cast<size_t>(b * block + i)] - xb[i]), e) << ggml_type_name(t) << " block " << b << " weight " << i;
    }
    for (size_t i = 1024; i < 1280; ++i) EXPECT_EQ(back[i], 0.0f) << ggml_type_name(t);  // a zero block stays zero
  }
}

// Naive round-to-nearest in the K-quant formats, as dequantized values: per sub-block the scale (and
// min) from its extremes, rounded to the super-block's 6-bit (Q6_K: 8-bit) grid of a float16 step.
std::vector<float> naive_kquant(GgmlType t, const std::vector<float>& x) {
  std::vector<float> out(x.size());
  const bool affine = t != GgmlType::Q6_K;
  const int sub = affine ? 32 : 16, top = t == GgmlType::Q4_K ? 15 : 31;
  for (size_t s = 0; s < x.size(); s += 256) {
    const float* xs = x.data() + s;
    std::vector<float> scale(256 / static_cast<size_t>(sub)), min(scale.size());
    float max_scale = 0.0f, max_min = 0.0f;
    for (size_t j = 0; j < scale.size(); ++j) {
      float lo = 0.0f, hi = 0.0f, amax = 0.0f;
      for (int i = 0; i < sub; ++i) {
        const float v = xs[j * static_cast<size_t>(sub) + static_cast<size_t>(i)];
        lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
      }
      scale[j] = affine ? (hi - lo) / static_cast<float>(top) : amax / 31.0f;
      min[j] = -lo;
      max_scale = std::max(max_scale, scale[j]), max_min = std::max(max_min, min[j]);
    }
    const float d = f16_to_f32(f32_to_f16(max_scale / (affine ? 63.0f : 127.0f))), dmin = f16_to_f32(f32_to_f16(max_min / 63.0f));
    for (size_t j = 0; j < scale.size(); ++j) {
      const float sc = d > 0 ? std::nearbyint(scale[j] / d) : 0.0f, m = dmin > 0 ? std::nearbyint(min[j] / dmin) : 0.0f;
      for (int i = 0; i < sub; ++i) {
        const size_t e = j * static_cast<size_t>(sub) + static_cast<size_t>(i);
        const float step = d * sc;
        if (step == 0.0f) {
          out[s + e] = affine ? -dmin * m : 0.0f;
          continue;
        }
        out[s + e] = affine ? d * sc * std::clamp(std::nearbyint((xs[e] + dmin * m) / step), 0.0f, static_cast<float>(top)) - dmin * m
                            : d * sc * std::clamp(std::nearbyint(xs[e] / step), -32.0f, 31.0f);
      }
    }
  }
  return out;
}

// Q5_0 naive: a symmetric step amax / 15, quants -15..15.
std::vector<float> naive_q5_0(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = f16_to_f32(f32_to_f16(amax / 15.0f));
    for (size_t i = 0; i < 32; ++i) out[b + i] = d > 0 ? d * std::clamp(std::nearbyint(x[b + i] / d), -15.0f, 15.0f) : 0.0f;
  }
  return out;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

TEST(GgmlReferenceQuantize, RmsNoWorseThanNaiveRoundToNearest) {
  for (uint32_t seed = 2; seed < 6; ++seed) {
    const std::vector<float> x = random_rows(8192, seed);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_0}) {
      const double ref = rms(round_trip(t, x), x);
      const double naive = rms(t == GgmlType::Q5_0 ? naive_q5_0(x) : naive_kquant(t, x), x);
      EXPECT_LE(ref, naive) << ggml_type_name(t) << " seed " << seed;
      EXPECT_GT(ref, 0.0) << ggml_type_name(t);
    }
  }
}

// More bits, less error: the ladder Q4_K > Q5_K > Q6_K > Q8_0 in RMS on the same rows.
TEST(GgmlReferenceQuantize, ErrorFallsWithBits) {
  const std::vector<float> x = random_rows(8192, 7);
  const double q4 = rms(round_trip(GgmlType::Q4_K, x), x), q5 = rms(round_trip(GgmlType::Q5_K, x), x);
  const double q6 = rms(round_trip(GgmlType::Q6_K, x), x), q8 = rms(round_trip(GgmlType::Q8_0, x), x);
  EXPECT_GT(q4, q5);
  EXPECT_GT(q5, q6);
  EXPECT_GT(q6, q8);
}

TEST(GgmlReferenceQuantize, RefusesOtherTypesAndPartialBlocks) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_FALSE(can_quantize_ref(GgmlType::Q3_K));
  EXPECT_THROW(quantize_row_ref(GgmlType::Q3_K, x.data(), 256, out.data()), Error);
  EXPECT_THROW(quantize_row_ref(GgmlType::Q6_K, x.data(), 128, out.data()), Error);
  for (GgmlType t : kRefTypes) EXPECT_TRUE(can_quantize(t)) << ggml_type_name(t);
}

}  // namespace
}  // namespace ember::kernels
