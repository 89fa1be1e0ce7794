#pragma once
// Internal: one value of a float32, float16 or bfloat16 row as float32, for the scalar references
// and the SIMD kernels' tails.
#include <cstdint>
#include <cstring>

#include "base/dtype.h"

namespace ember::kernels::simd {

// memcpy, as the vector loads do: weights mapped from a safetensors file need not be aligned to
// their type (its header length is arbitrary).
inline float load1(const void* base, DType t, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(base);
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace ember::kernels::simd
