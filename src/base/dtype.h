#pragma once
// Element types of stored weights and the exact conversions to float32.
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ember {

enum class DType : uint8_t { F32, F16, BF16 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t);                                      // "F32", "F16", "BF16"
std::optional<DType> parse_dtype(std::string_view safetensors_name);  // "F32", "F16", "BF16"
// The lowercase names of flags (--kv-dtype, --dtype) and reports, as llama.cpp spells them.
const char* dtype_lower_name(DType t);                      // "f32", "f16", "bf16"
std::optional<DType> parse_lower_dtype(std::string_view name);  // "f32", "f16", "bf16"
std::span<const char* const> dtype_lower_names();             // the same, for --dtype

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, NaN kept quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace ember
