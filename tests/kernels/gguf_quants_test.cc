// ggml block formats: the type table, and dequantization of hand-built blocks whose values follow
// from the format's definition. (Every block type of the shared GGUF fixtures, IQ4_NL, IQ4_XS, IQ3_S and
// MXFP4 included, is checked against gguf-py's reference rows in tests/model/gguf_test.cc.)
#include "kernels/gguf_quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"

namespace ember::kernels {
namespace {

TEST(GgmlTypes, IdsNamesAndBlockGeometry) {
  struct Row {
    uint32_t id;
    const char* name;
    int64_t block, bytes;
  };
  for (const Row& r : {Row{0, "F32", 1, 4}, Row{1, "F16", 1, 2}, Row{2, "Q4_0", 32, 18}, Row{8, "Q8_0", 32, 34},
                       Row{12, "Q4_K", 256, 144}, Row{13, "Q5_K", 256, 176}, Row{14, "Q6_K", 256, 210},
                       Row{15, "Q8_K", 256, 292}, Row{30, "BF16", 1, 2}}) {
    const auto info = ggml_type_info(r.id);
    ASSERT_TRUE(info) << r.name;
    EXPECT_STREQ(info->name, r.name);
    EXPECT_EQ(info->block_size, r.block) << r.name;
    EXPECT_EQ(info->block_bytes, r.bytes) << r.name;
    EXPECT_EQ(static_cast<uint32_t>(*parse_ggml_type(r.name)), r.id);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) EXPECT_FALSE(ggml_type_info(removed)) << removed;
  EXPECT_FALSE(parse_ggml_type("Q4_2"));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), 288);
  EXPECT_THROW(ggml_row_bytes(GgmlType::Q4_K, 100), Error);
}

void put_f16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
  b[at] = static_cast<uint8_t>(h & 0xFF);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

TEST(Dequantize, Q8_0AndQ4_0FollowTheirDefinition) {
  std::vector<uint8_t> q8(34);
  put_f16(q8, 0, 0.5f);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  std::vector<float> out(32);
  dequantize_row(GgmlType::Q8_0, q8.data(), 32, out.data());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 16)) << j;

  std::vector<uint8_t> q4(18);
  put_f16(q4, 0, 2.0f);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  dequantize_row(GgmlType::Q4_0, q4.data(), 32, out.data());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * static_cast<float>(j - 8)) << j;             // low nibbles first
    EXPECT_EQ(out[j + 16], 2.0f * static_cast<float>(15 - j - 8)) << j;  // then the high nibbles
  }
}

TEST(Dequantize, PlainTypesAndSeveralBlocks) {
  const std::vector<float> f = {1.5f, -2.25f, 0.0f, 3e-5f};
  std::vector<float> out(4);
  dequantize_row(GgmlType::F32, f.data(), 4, out.data());
  EXPECT_EQ(out, f);
  std::vector<uint16_t> h, b;
  for (float v : f) h.push_back(f32_to_f16(v)), b.push_back(f32_to_bf16(v));
  dequantize_row(GgmlType::F16, h.data(), 4, out.data());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(out[i], f16_to_f32(h[i]));
  dequantize_row(GgmlType::BF16, b.data(), 4, out.data());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(out[i], bf16_to_f32(b[i]));

  // Q8_K: float32 scale per 256 values; two blocks with different scales.
  std::vector<uint8_t> k(2 * 292, 0);
  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk == 0 ? 0.25f : -1.0f;
    std::memcpy(k.data() + blk * 292, &d, 4);
    for (int j = 0; j < 256; ++j) k[blk * 292 + 4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j % 100 - 50));
  }
  std::vector<float> y(512);
  dequantize_row(GgmlType::Q8_K, k.data(), 512, y.data());
  EXPECT_EQ(y[3], 0.25f * -47.0f);
  EXPECT_EQ(y[256 + 3], 47.0f);
}

TEST(Dequantize, Q6_KSubBlockScalesAndHighBits) {
  // All low nibbles 1, all high bit pairs 2 (q = 1 | 2 << 4 = 33, minus 32 = 1), scale k for the
  // k-th run of 16 values: value i is d * (i / 16).
  std::vector<uint8_t> b(210, 0);
  std::memset(b.data(), 0x11, 128);
  std::memset(b.data() + 128, 0xAA, 64);
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(s);
  put_f16(b, 208, 0.125f);
  std::vector<float> out(256);
  dequantize_row(GgmlType::Q6_K, b.data(), 256, out.data());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], 0.125f * static_cast<float>(i / 16)) << i;
}

TEST(Dequantize, Q4_1Q5_0Q5_1FollowTheirDefinition) {
  std::vector<float> out(32);
  std::vector<uint8_t> q41(20);
  put_f16(q41, 0, 0.5f);
  put_f16(q41, 2, -1.0f);
  for (int j = 0; j < 16; ++j) q41[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  dequantize_row(GgmlType::Q4_1, q41.data(), 32, out.data());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.5f * static_cast<float>(15 - j) - 1.0f) << j;
  }
  // Fifth bits set for the odd elements: qh = 0xAAAAAAAA.
  std::vector<uint8_t> q50(22), q51(24);
  put_f16(q50, 0, 2.0f);
  put_f16(q51, 0, 2.0f);
  put_f16(q51, 2, 0.25f);
  for (int i = 0; i < 4; ++i) q50[2 + i] = q51[4 + i] = 0xAA;
  for (int j = 0; j < 16; ++j) q50[6 + j] = q51[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto quant = [](int e) { return (e < 16 ? e : 31 - e) + (e % 2 ? 16 : 0); };
  dequantize_row(GgmlType::Q5_0, q50.data(), 32, out.data());
  for (int e = 0; e < 32; ++e) EXPECT_EQ(out[e], 2.0f * static_cast<float>(quant(e) - 16)) << e;
  dequantize_row(GgmlType::Q5_1, q51.data(), 32, out.data());
  for (int e = 0; e < 32; ++e) EXPECT_EQ(out[e], 2.0f * static_cast<float>(quant(e)) + 0.25f) << e;
}

TEST(Dequantize, Q2_KAndQ3_KFollowTheirDefinition) {
  std::vector<float> out(256);
  // Q2_K: quant k (0..3) of every byte is k; scale s & 15 = s % 16, min = 1 for every sub-block.
  std::vector<uint8_t> q2(84);
  for (int s = 0; s < 16; ++s) q2[s] = static_cast<uint8_t>(s | (1 << 4));
  std::memset(q2.data() + 16, 0b11100100, 64);
  put_f16(q2, 80, 0.5f);
  put_f16(q2, 82, 0.125f);
  dequantize_row(GgmlType::Q2_K, q2.data(), 256, out.data());
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(out[e], 0.5f * static_cast<float>(e / 16) * static_cast<float>((e % 128) / 32) - 0.125f) << e;
  // Q3_K: the same 2-bit quants, high bits set in the even bit positions only (elements 32b + l with
  // b even keep q, odd b subtract 4); every 6-bit scale 33 (low nibble 1, top bits 2), i.e. 1.
  std::vector<uint8_t> q3(110);
  std::memset(q3.data(), 0x55, 32);
  std::memset(q3.data() + 32, 0b11100100, 64);
  std::memset(q3.data() + 96, 0x11, 8);
  std::memset(q3.data() + 104, 0xAA, 4);
  put_f16(q3, 108, 0.25f);
  dequantize_row(GgmlType::Q3_K, q3.data(), 256, out.data());
  for (int e = 0; e < 256; ++e) {
    const int q = (e % 128) / 32 - ((e / 32) % 2 ? 4 : 0);
    EXPECT_EQ(out[e], 0.25f * static_cast<float>(q)) << e;
  }
}

TEST(Dequantize, UnsupportedTypesAndPartialBlocksAreErrors) {
  std::vector<uint8_t> zeros(1024, 0);
  std::vector<float> out(256);
  EXPECT_FALSE(can_dequantize(GgmlType::IQ2_XXS));
  try {
    dequantize_row(GgmlType::IQ2_XXS, zeros.data(), 256, out.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
  try {
    dequantize_row(GgmlType::Q4_K, zeros.data(), 100, out.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K"), std::string::npos) << e.what();
  }
}

// quantize_row writes ggml's reference blocks: Q8_0's scale amax/127 and Q4_0's -(largest)/8, quants
// rounded half away from zero (roundf, as quantize_row_q8_0_ref), every weight within half a step
// (plus the float16 scale's rounding);
// float types exactly as stored; a type it cannot write or a partial block refused by name.
TEST(GgmlQuantize, Q8_0AndQ4_0AreGgmlsReference) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i * 37) % 29) - 14) * 0.37f;
  x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f;  // scale 1: the ties round away from zero
  std::vector<uint8_t> q8(static_cast<size_t>(ggml_row_bytes(GgmlType::Q8_0, 64)));
  quantize_row(GgmlType::Q8_0, x.data(), 64, q8.data());
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(q8[0] | (q8[1] << 8))), 1.0f);
  EXPECT_EQ(static_cast<int8_t>(q8[2 + 1]), 3);
  EXPECT_EQ(static_cast<int8_t>(q8[2 + 2]), -3);
  std::vector<float> back(64);
  dequantize_row(GgmlType::Q8_0, q8.data(), 64, back.data());
  for (size_t b = 0; b < 2; ++b) {
    float amax = 0;
    for (size_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[32 * b + k]));
    for (size_t k = 0; k < 32; ++k) EXPECT_LE(std::fabs(back[32 * b + k] - x[32 * b + k]), 0.6f * amax / 127.0f) << b << " " << k;
  }
  x[0] = -8.0f;  // Q4_0: scale -(-8)/8 = 1, quants offset by 8
  std::vector<uint8_t> q4(static_cast<size_t>(ggml_row_bytes(GgmlType::Q4_0, 64)));
  quantize_row(GgmlType::Q4_0, x.data(), 64, q4.data());
  dequantize_row(GgmlType::Q4_0, q4.data(), 64, back.data());
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[1], 3.0f);   // (int)(2.5 + 8.5) - 8
  EXPECT_EQ(back[2], -2.0f);  // (int)(-2.5 + 8.5) - 8
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    std::vector<uint8_t> plain(static_cast<size_t>(ggml_row_bytes(t, 64)));
    quantize_row(t, x.data(), 64, plain.data());
    dequantize_row(t, plain.data(), 64, back.data());
    EXPECT_EQ(back[5], t == GgmlType::F32 ? x[5] : t == GgmlType::F16 ? f16_to_f32(f32_to_f16(x[5])) : bf16_to_f32(f32_to_bf16(x[5])));
  }
  EXPECT_TRUE(can_quantize(GgmlType::Q4_K));
  EXPECT_TRUE(can_quantize(GgmlType::Q6_K));
  EXPECT_FALSE(can_quantize(GgmlType::Q3_K));
  EXPECT_THROW(quantize_row(GgmlType::Q3_K, x.data(), 256, q8.data()), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q8_0, x.data(), 48, q8.data()), Error);
}

}  // namespace
}  // namespace ember::kernels
