#pragma once
// Internal: AVX2 loads and stores of float32, float16 and bfloat16 rows, shared by the kernels.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/dtype.h"

namespace ember::kernels::simd {

// 8 values from element i of a row stored as T, as float32 (the type is a template argument, so
// there is no branch per load).
template <DType T>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (T == DType::F32) return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
  if constexpr (T == DType::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// One value of a row stored as t, as float32. memcpy, as the vector loads do: weights mapped from a
// safetensors file need not be aligned to their type (its header length is arbitrary).
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
