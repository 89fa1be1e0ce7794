#pragma once
// Internal: AVX2 loads of float32, float16 and bfloat16 rows and small reductions, shared by the
// AVX2 code (the build's baseline).
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

// The largest of 8 floats; the sum of 8 int32.
inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
inline int32_t hsum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}
// 32 int32 (q[0] holds values 0-7, q[1] 8-15, ...) saturated to int8, in order.
inline __m256i pack_i8(const __m256i q[4]) {
  // The packs work per 128-bit half, which leaves the 4-byte groups in the order 0 2 4 6 1 3 5 7.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace ember::kernels::simd
