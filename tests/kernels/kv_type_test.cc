// KV row formats: names, sizes, and Q8_0's rounding (each value within half a step of its block's
// scale, the scale being the block's absolute maximum / 127).
#include "kernels/kv_type.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"

namespace ember::kernels {
namespace {

TEST(KvType, NamesRoundTrip) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0}) EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  EXPECT_FALSE(parse_kv_type("q4_0").has_value());
}

TEST(KvType, RowBytes) {
  EXPECT_EQ(kv_row_bytes(KvType::F32, 64), 256);
  EXPECT_EQ(kv_row_bytes(KvType::F16, 64), 128);
  EXPECT_EQ(kv_row_bytes(KvType::Q8_0, 128), 4 * 34);  // llama.cpp's q8_0 blocks
  EXPECT_EQ(kv_row_bytes(KvType::Q8_0, 16), 18);
  EXPECT_EQ(kv_row_bytes(KvType::Q8_0, 24), 3 * 10);
  try {
    kv_row_bytes(KvType::Q8_0, 12);
    FAIL() << "a head size of 12 has no Q8_0 blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
  }
}

TEST(KvType, Q8RowsRoundWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t hd : {8, 16, 32, 96, 128}) {
    std::vector<float> x(static_cast<size_t>(hd));
    for (auto& v : x) v = dist(rng);
    x[0] = 0.0f;
    std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(KvType::Q8_0, hd)));
    store_kv_row(x.data(), hd, KvType::Q8_0, row.data());
    const int64_t b = kv_q8_block(hd);
    for (int64_t i0 = 0; i0 < hd; i0 += b) {
      float amax = 0;
      for (int64_t i = i0; i < i0 + b; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
      const float step = amax / 127.0f;
      for (int64_t i = i0; i < i0 + b; ++i) {
        float got = 0;
        switch (b) {
          case 32: got = q8_row_value<32>(row.data(), i); break;
          case 16: got = q8_row_value<16>(row.data(), i); break;
          default: got = q8_row_value<8>(row.data(), i); break;
        }
        // Half a step, plus the F16 rounding of the scale (2^-11 relative) over up to 127 steps.
        EXPECT_NEAR(got, x[static_cast<size_t>(i)], 0.5f * step + amax * 0x1p-10f) << "hd " << hd << " i " << i;
      }
    }
  }
  std::vector<float> zeros(32, 0.0f);
  std::vector<uint8_t> row(34);
  store_kv_row(zeros.data(), 32, KvType::Q8_0, row.data());
  EXPECT_EQ(q8_row_value<32>(row.data(), 5), 0.0f);
}

}  // namespace
}  // namespace ember::kernels
