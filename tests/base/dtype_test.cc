#include "base/dtype.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <span>
#include <string>

#include "base/format.h"

namespace ember {

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.0f)), -2.0f);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (down to 1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
}

TEST(DType, F16ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(DType, ParseNames) {
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
  EXPECT_FALSE(parse_dtype("I64").has_value());
}

TEST(DType, LowerNamesRoundTrip) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    EXPECT_EQ(parse_lower_dtype(dtype_lower_name(t)), t);
    std::string lower = dtype_name(t);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(dtype_lower_name(t), lower);
  }
  EXPECT_FALSE(parse_lower_dtype("BF16").has_value());
  EXPECT_FALSE(parse_lower_dtype("q8_0").has_value());
  // The list --dtype's help and check come from is the same table.
  ASSERT_EQ(dtype_lower_names().size(), 3u);
  for (const char* name : dtype_lower_names()) EXPECT_STREQ(dtype_lower_name(*parse_lower_dtype(name)), name);
}

TEST(Format, OneOfJoinsNamesAsASentence) {
  const char* three[] = {"f32", "f16", "bf16"};
  EXPECT_EQ(one_of(three), "f32, f16 or bf16");
  EXPECT_EQ(one_of(std::span(three).first(1)), "f32");
  EXPECT_EQ(one_of({}), "");
}

}  // namespace ember
