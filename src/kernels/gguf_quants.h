#pragma once
// ggml's tensor element types as GGUF files store them (ids, block geometry, names) and the scalar
// reference dequantization of their blocks: the ground truth that faster kernels are tested against.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ember::kernels {

// ggml_type ids exactly as written in GGUF tensor infos; the gaps (4, 5, 31-33, 36-38) are types
// ggml has removed.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// Elements per block of the K-quants (a "super-block" of 8 or 16 sub-blocks).
constexpr int64_t kQK_K = 256;

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;      // as ggml and gguf-py spell it: "Q4_K", "BF16", ...
  int64_t block_size;    // elements per block (1 for plain element types)
  int64_t block_bytes;   // bytes per block
};

// The type with this GGUF id, or nullopt for an id ggml does not define (or has removed).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
// Same for a type of the enum; never fails.
GgmlTypeInfo ggml_type_info(GgmlType type);
const char* ggml_type_name(GgmlType type);
// By name ("Q8_0", case as ggml spells it), or nullopt.
std::optional<GgmlType> parse_ggml_type(std::string_view name);

// Whether dequantize_row handles the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, IQ3_S, MXFP4 (the other I-quants and the ternary types are
// not).
bool can_dequantize(GgmlType type);

// Bytes that n elements of `type` occupy. n must be a multiple of the block size; throws
// ember::Error naming the type otherwise.
int64_t ggml_row_bytes(GgmlType type, int64_t n);

// Converts n elements (whole blocks) starting at src to float32, exactly as ggml's reference
// (gguf-py quants.dequantize) does, in float32 arithmetic. Throws ember::Error naming the type for a
// type can_dequantize refuses, or for n not a multiple of the block size.
void dequantize_row(GgmlType type, const void* src, int64_t n, float* out);

// Whether quantize_row writes the type: F32, F16, BF16, and the block types of can_quantize_ref.
bool can_quantize(GgmlType type);

// Writes n float32 elements (whole blocks) as `type` at dst (ggml_row_bytes(type, n) bytes), in
// ggml's layout: F16 / BF16 rounded to nearest even; Q4_K as Ember's quantize_q4_k_row (kquant.h);
// the other block types as quantize_row_ref. Throws ember::Error naming the type for one
// can_quantize refuses or n not a multiple of the block size.
void quantize_row(GgmlType type, const float* src, int64_t n, void* dst);

// Whether quantize_row_ref writes the type: Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
bool can_quantize_ref(GgmlType type);
// n float32 elements (whole blocks) as ggml's reference quantizers write them without an importance
// matrix (ggml-quants.c's quantize_row_*_ref, what llama-quantize writes): Q8_0 scale amax / 127;
// Q4_0 / Q5_0 scale -(value of largest magnitude) / 8 / 16; Q5_1 the block's range over 31 from its
// min; Q4_K / Q5_K a weighted least-squares affine fit per 32 (make_qkx2_quants) with 6-bit scales and
// mins; Q6_K a weighted signed fit per 16 (make_qx_quants) with 8-bit scales. Throws ember::Error
// naming the type for another type or n not a multiple of the block size.
void quantize_row_ref(GgmlType type, const float* src, int64_t n, void* dst);

// The 6-bit scale and min of sub-block j (0..7) packed in the 12 bytes of Q4_K / Q5_K: bytes 0-3 hold
// the scales of 0-3 (low 6 bits) and the top bits of the scales of 4-7, bytes 4-7 the same for the
// mins, bytes 8-11 the low 4 bits of scale (low nibble) and min (high nibble) of 4-7.
void kquant_scale_min(int j, const uint8_t* s, int& sc, int& m);

// IQ4_NL / IQ4_XS: a 4-bit index per weight into this non-linear table (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// MXFP4: E2M1 codes doubled, as ggml keeps them (kvalues_mxfp4), so that the scale is halved.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// MXFP4's E8M0 scale byte, halved as the doubled codes need: 2^(e - 128), a float32 subnormal for
// e < 2 (ggml_e8m0_to_fp32_half).
inline float e8m0_half_to_f32(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace ember::kernels
