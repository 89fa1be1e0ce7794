#include "base/dtype.h"

#include <array>
#include <cmath>

namespace ember {

namespace {

// Each type's names, in one place for both directions.
struct Names {
  DType type;
  const char* safetensors;
  const char* lower;
};
constexpr Names kNames[] = {{DType::F32, "F32", "f32"}, {DType::F16, "F16", "f16"}, {DType::BF16, "BF16", "bf16"}};

const Names* names_of(DType t) {
  for (const Names& n : kNames)
    if (n.type == t) return &n;
  return nullptr;
}

template <class Field>
std::optional<DType> find_by(std::string_view name, Field field) {
  for (const Names& n : kNames)
    if (name == n.*field) return n.type;
  return std::nullopt;
}

}  // namespace

const char* dtype_name(DType t) {
  const Names* n = names_of(t);
  return n ? n->safetensors : "?";
}

std::optional<DType> parse_dtype(std::string_view s) { return find_by(s, &Names::safetensors); }

const char* dtype_lower_name(DType t) {
  const Names* n = names_of(t);
  return n ? n->lower : "?";
}

std::optional<DType> parse_lower_dtype(std::string_view s) { return find_by(s, &Names::lower); }

std::span<const char* const> dtype_lower_names() {
  static constexpr auto names = [] {
    std::array<const char*, std::size(kNames)> a{};
    for (size_t i = 0; i < a.size(); ++i) a[i] = kNames[i].lower;
    return a;
  }();
  return names;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t man = h & 0x3FF;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal
    return sign ? -f : f;
  }
  uint32_t bits;
  if (exp == 31) bits = sign | 0x7F800000u | (man << 13);
  else bits = sign | ((exp + 112) << 23) | (man << 13);
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00;           // NaN
  if (ax >= 0x477FF000u) return sign | 0x7C00;          // overflow to inf (after rounding)
  if (ax < 0x38800000u) {                               // subnormal or zero
    float a;
    std::memcpy(&a, &ax, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1u) - 0x38000000u;  // rebias 127->15, round to nearest even
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace ember
