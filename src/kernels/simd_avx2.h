#pragma once
// Internal: AVX2 loads of float32, float16 and bfloat16 rows, shared by the AVX2 kernels.
#include <immintrin.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/load_scalar.h"

namespace ember::kernels::simd {

constexpr int64_t kLanes = 8;  // float32 values in one __m256

// n rounded down / up to whole vectors.
constexpr int64_t floor_lanes(int64_t n) { return n & ~(kLanes - 1); }
constexpr int64_t ceil_lanes(int64_t n) { return floor_lanes(n + kLanes - 1); }

// 8 values from element i of a row stored as T, as float32 (the type is a template argument, so
// there is no branch per load).
template <DType T>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (T == DType::F32) return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
  if constexpr (T == DType::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

}  // namespace ember::kernels::simd
