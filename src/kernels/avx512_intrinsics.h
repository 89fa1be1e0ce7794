#pragma once
// The intrinsics of the *_avx512.cc kernels: the compiler's, or, where EMBER_AVX512_EMULATED is
// defined (the test build tests/kernels/CMakeLists.txt makes for machines without AVX-512), SIMDe's
// portable versions of the same functions on the AVX2 baseline, plus the few SIMDe 0.7.4 lacks or
// misnames. An intrinsic missing from both stays the compiler's and fails to compile there (target
// mismatch), so the emulated build never runs a real AVX-512 instruction.
#include <immintrin.h>

#if defined(EMBER_AVX512_EMULATED)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
// Tells exp.h to define its AVX-512 function, which it otherwise does only under -mavx512f.
#define EMBER_AVX512_EMULATED_INTRINSICS 1

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ember::kernels::emulated {

// Lane-wise conversions through memory: the emulated build is for correctness, not speed.
template <class To, class From, class V, class R>
inline R widen(V v) {
  From in[64 / sizeof(To)];
  std::memcpy(in, &v, sizeof(in));
  To out[64 / sizeof(To)];
  for (size_t i = 0; i < sizeof(out) / sizeof(To); ++i) out[i] = static_cast<To>(in[i]);
  R r;
  std::memcpy(&r, out, sizeof(r));
  return r;
}
inline __m512 cvtph_ps(__m256i h) {
  float out[16];
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
  _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
  return simde_mm512_loadu_ps(out);
}
// Rounds as the instruction does (the MXCSR mode, nearest even by default).
inline __m512i cvtps_epi32(__m512 v) {
  float in[16];
  simde_mm512_storeu_ps(in, v);
  int32_t out[16];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtps_epi32(_mm256_loadu_ps(in)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_cvtps_epi32(_mm256_loadu_ps(in + 8)));
  return simde_mm512_loadu_si512(out);
}
// Masked-off lanes are neither read nor written, as the instructions guarantee (no fault past a row's end).
inline __m512 maskz_loadu_ps(__mmask16 k, const void* p) {
  float out[16] = {};
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) std::memcpy(out + i, static_cast<const float*>(p) + i, 4);
  return simde_mm512_loadu_ps(out);
}
inline void mask_storeu_ps(void* p, __mmask16 k, __m512 v) {
  float in[16];
  simde_mm512_storeu_ps(in, v);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) std::memcpy(static_cast<float*>(p) + i, in + i, 4);
}

inline __m512i srai_epi32(__m512i v, unsigned s) {
  int32_t lanes[16];
  std::memcpy(lanes, &v, sizeof(lanes));
  for (int32_t& l : lanes) l = s > 31 ? (l < 0 ? -1 : 0) : l >> s;  // arithmetic, as the instruction
  std::memcpy(&v, lanes, sizeof(lanes));
  return v;
}

// 16 int32 loads at base + scale * index (IQ3_S's grid).
inline __m512i i32gather_epi32(__m512i index, const void* base, int scale) {
  int32_t idx[16], out[16];
  std::memcpy(idx, &index, sizeof(idx));
  for (int i = 0; i < 16; ++i) std::memcpy(out + i, static_cast<const char*>(base) + static_cast<int64_t>(idx[i]) * scale, 4);
  __m512i r;
  std::memcpy(&r, out, sizeof(r));
  return r;
}

// vdpbf16ps: each 32-bit lane adds its odd word's exact BF16 product to the accumulator, rounds,
// then its even word's; inputs and results below float32's normal range are taken as zero.
inline float flush_tiny(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }
inline __m512 dpbf16_ps(__m512 acc, __m512i a, __m512i b) {
  float s[16];
  uint32_t wa[16], wb[16];
  std::memcpy(s, &acc, sizeof(s));
  std::memcpy(wa, &a, sizeof(wa));
  std::memcpy(wb, &b, sizeof(wb));
  auto word = [](uint32_t w, int shift) {
    const uint32_t bits = ((w >> shift) & 0xFFFFu) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return flush_tiny(f);
  };
  for (int i = 0; i < 16; ++i) {
    s[i] = flush_tiny(std::fma(word(wa[i], 16), word(wb[i], 16), flush_tiny(s[i])));
    s[i] = flush_tiny(std::fma(word(wa[i], 0), word(wb[i], 0), s[i]));
  }
  std::memcpy(&acc, s, sizeof(s));
  return acc;
}

}  // namespace ember::kernels::emulated

#define _mm512_cvtepi32_ps(a) (::ember::kernels::emulated::widen<float, int32_t, __m512i, __m512>(a))
#define _mm512_cvtepi8_epi32(a) (::ember::kernels::emulated::widen<int32_t, int8_t, __m128i, __m512i>(a))
#define _mm512_cvtepu8_epi32(a) (::ember::kernels::emulated::widen<int32_t, uint8_t, __m128i, __m512i>(a))
#define _mm512_cvtepu8_epi16(a) (::ember::kernels::emulated::widen<int16_t, uint8_t, __m256i, __m512i>(a))
#define _mm512_srai_epi32(a, s) (::ember::kernels::emulated::srai_epi32((a), (s)))
#define _mm512_cvtepu16_epi32(a) (::ember::kernels::emulated::widen<int32_t, uint16_t, __m256i, __m512i>(a))
#define _cvtu64_mask64(a) (static_cast<simde__mmask64>(a))
#define _mm512_i32gather_epi32(i, p, s) (::ember::kernels::emulated::i32gather_epi32((i), (p), (s)))
#define _mm512_cvtps_epi32(a) (::ember::kernels::emulated::cvtps_epi32(a))
#define _mm512_cvtph_ps(a) (::ember::kernels::emulated::cvtph_ps(a))
#define _mm512_maskz_loadu_ps(k, p) (::ember::kernels::emulated::maskz_loadu_ps((k), (p)))
#define _mm512_mask_storeu_ps(p, k, v) (::ember::kernels::emulated::mask_storeu_ps((p), (k), (v)))
#define _mm512_shuffle_f32x4(a, b, imm) (simde_mm512_shuffle_f32x4((a), (b), (imm)))
// SIMDe 0.7.4 aliases the plain form to the masked one's four arguments.
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) (simde_mm512_madd_epi16((a), (b)))
#endif
