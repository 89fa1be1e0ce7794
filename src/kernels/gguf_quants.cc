#include "kernels/gguf_quants.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/iq3s_grid.h"
#include "kernels/kquant.h"

namespace ember::kernels {

namespace {

using T = GgmlType;

// Block geometry of every type ggml defines (gguf-py GGML_QUANT_SIZES; Q8_1 as ggml's block_q8_1,
// a float16 pair and 32 quants).
constexpr std::array<GgmlTypeInfo, 32> kTypes = {{
    {T::F32, "F32", 1, 4},          {T::F16, "F16", 1, 2},          {T::Q4_0, "Q4_0", 32, 18},
    {T::Q4_1, "Q4_1", 32, 20},      {T::Q5_0, "Q5_0", 32, 22},      {T::Q5_1, "Q5_1", 32, 24},
    {T::Q8_0, "Q8_0", 32, 34},      {T::Q8_1, "Q8_1", 32, 36},      {T::Q2_K, "Q2_K", 256, 84},
    {T::Q3_K, "Q3_K", 256, 110},    {T::Q4_K, "Q4_K", 256, 144},    {T::Q5_K, "Q5_K", 256, 176},
    {T::Q6_K, "Q6_K", 256, 210},    {T::Q8_K, "Q8_K", 256, 292},    {T::IQ2_XXS, "IQ2_XXS", 256, 66},
    {T::IQ2_XS, "IQ2_XS", 256, 74}, {T::IQ3_XXS, "IQ3_XXS", 256, 98}, {T::IQ1_S, "IQ1_S", 256, 50},
    {T::IQ4_NL, "IQ4_NL", 32, 18},  {T::IQ3_S, "IQ3_S", 256, 110},  {T::IQ2_S, "IQ2_S", 256, 82},
    {T::IQ4_XS, "IQ4_XS", 256, 136}, {T::I8, "I8", 1, 1},            {T::I16, "I16", 1, 2},
    {T::I32, "I32", 1, 4},          {T::I64, "I64", 1, 8},          {T::F64, "F64", 1, 8},
    {T::IQ1_M, "IQ1_M", 256, 56},   {T::BF16, "BF16", 1, 2},        {T::TQ1_0, "TQ1_0", 256, 54},
    {T::TQ2_0, "TQ2_0", 256, 66},   {T::MXFP4, "MXFP4", 32, 17},
}};

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

// Q4_0: float16 scale d, 16 bytes of nibbles; element j is the low nibble of byte j, element j+16
// its high nibble, both offset by 8.
void q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: float16 scale d and min m, nibbles as Q4_0 without the offset; element = d*q + m.
void q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b), m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    const float lo = d * static_cast<float>(qs[j] & 0x0F), hi = d * static_cast<float>(qs[j] >> 4);
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

// The 5-bit quants of Q5_0 / Q5_1: nibbles as Q4_0, bit j of the little-endian qh word is element j's
// fifth bit.
int q5_quant(const uint8_t* qh, const uint8_t* qs, int j) {
  const uint32_t h = static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
                     (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | static_cast<int>(((h >> j) & 1u) << 4);
}

// Q5_0: float16 scale, 4 bytes of fifth bits, 16 bytes of nibbles; element = d * (q - 16).
void q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_quant(b + 2, b + 6, j) - 16);
}

// Q5_1: float16 scale and min, fifth bits, nibbles; element = d*q + m.
void q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b), m = load_f16(b + 2);
  for (int j = 0; j < 32; ++j) {
    const float scaled = d * static_cast<float>(q5_quant(b + 4, b + 8, j));
    y[j] = scaled + m;
  }
}

// Q8_0: float16 scale, 32 signed bytes.
void q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

// Q2_K: 16 bytes of 4-bit scale (low nibble) and min (high nibble) per 16 elements, 64 bytes of 2-bit
// quants, float16 d and dmin. Element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l];
// element = d*scale * q - dmin*min.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = load_f16(b + 80), dmin = load_f16(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const float dl = d * static_cast<float>(scales[e / 16] & 0x0F), ml = dmin * static_cast<float>(scales[e / 16] >> 4);
    const float scaled = dl * static_cast<float>((qs[32 * h + l] >> (2 * k)) & 3);
    y[e] = scaled - ml;
  }
}

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit quants (laid out as Q2_K's), 12 bytes of 6-bit
// scales, float16 d. Element 32b + l has high bit b of hmask[l]; a clear high bit subtracts 4. Scale s
// (per 16 elements): low 4 bits from byte s % 8 (high nibble for s >= 8), top 2 bits from byte
// 8 + s % 4 at bit 2 * (s / 4); offset by 32.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = load_f16(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 16;
    const int low = s < 8 ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * static_cast<float>((low | (high << 4)) - 32);
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int q = ((qs[32 * h + l] >> (2 * k)) & 3) - (((hmask[l] >> (e / 32)) & 1) ? 0 : 4);
    y[e] = dl * static_cast<float>(q);
  }
}

}  // namespace

void kquant_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

namespace {

// Q4_K: float16 d and dmin, 12 bytes of scales/mins, 128 bytes of nibbles. 64 elements share 32 bytes:
// the first 32 are their low nibbles (sub-block 2i), the next 32 their high nibbles (2i+1).
// Element = d*scale * q - dmin*min, rounded after the product as numpy does.
void q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b), dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) {
      int sc, m;
      kquant_scale_min(2 * i + h, scales, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int q = h == 0 ? (qs[32 * i + l] & 0x0F) : (qs[32 * i + l] >> 4);
        const float scaled = dl * static_cast<float>(q);  // own statement: no fused multiply-add
        y[64 * i + 32 * h + l] = scaled - ml;
      }
    }
  }
}

// Q5_K: as Q4_K with a fifth bit per element: bit j of qh[l] belongs to element 32j + l.
void q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b), dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * i + h;
      int sc, m;
      kquant_scale_min(j, scales, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int low = h == 0 ? (qs[32 * i + l] & 0x0F) : (qs[32 * i + l] >> 4);
        const int q = low | (((qh[l] >> j) & 1) << 4);
        const float scaled = dl * static_cast<float>(q);
        y[32 * j + l] = scaled - ml;
      }
    }
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed 8-bit scales (one per 16
// elements), float16 d. Each half of 128 elements takes 64 low bytes and 32 high bytes: element
// 32k + l of the half has the low nibble of ql[l + 32*(k%2)] (high nibble for k >= 2) and bits
// 2k..2k+1 of qh[l]; quants are offset by 32.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql_all = b;
  const uint8_t* qh_all = b + 128;
  const auto* sc_all = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = ql_all + 64 * half;
    const uint8_t* qh = qh_all + 32 * half;
    const int8_t* sc = sc_all + 8 * half;
    float* out = y + 128 * half;
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = ql[l + 32 * (k % 2)];
        const int low = k < 2 ? (lo & 0x0F) : (lo >> 4);
        const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
        const int e = 32 * k + l;
        out[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(q);
      }
    }
  }
}

// Q8_K: float32 scale, 256 signed bytes, 16 int16 block sums (only the dot products use them).
void q8_k(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

// IQ4_NL: float16 d, 16 bytes of indices laid out as Q4_0's nibbles; element = d * table[index].
void iq4_nl(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[b[2 + j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4Values[b[2 + j] >> 4]);
  }
}

// IQ4_XS: float16 d, 16 bits of the scales' top 2 bits (2 per sub-block of 32), 4 bytes of their low
// nibbles (sub-block 2i in byte i's low nibble, 2i + 1 in its high one), then per sub-block 16 bytes of
// indices as IQ4_NL's. Element = (d * (scale - 32)) * table[index].
void iq4_xs(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint16_t high = load_u16(b + 2);
  for (int j = 0; j < 8; ++j, y += 32) {
    const int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 0x0F) | (((high >> (2 * j)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    const uint8_t* qs = b + 8 + 16 * j;
    for (int k = 0; k < 16; ++k) {
      y[k] = dl * static_cast<float>(kIq4Values[qs[k] & 0x0F]);
      y[k + 16] = dl * static_cast<float>(kIq4Values[qs[k] >> 4]);
    }
  }
}

// IQ3_S: float16 d, 64 bytes of grid index low bits, 8 bytes of their ninth bits (bit l of qh[i]
// for index 8i + l), 32 bytes of signs (bit k of byte s: element 8s + k is negative), 4 bytes of 4-bit
// scales (sub-block of 32 j: byte j / 2, low nibble for even j). Index i gives elements 4i..4i+3.
// Element = (d * (1 + 2 * scale)) * magnitude * sign.
void iq3_s(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  const uint8_t* qh = b + 66;
  const uint8_t* signs = b + 74;
  const uint8_t* scales = b + 106;
  for (int j = 0; j < 8; ++j) {
    const float db = d * static_cast<float>(1 + 2 * ((scales[j / 2] >> (4 * (j % 2))) & 0x0F));
    for (int i = 8 * j; i < 8 * j + 8; ++i) {
      const int index = qs[i] | (((qh[i / 8] >> (i % 8)) & 1) << 8);
      for (int k = 0; k < 4; ++k) {
        const int e = 4 * i + k;
        const float m = db * static_cast<float>(iq3s_magnitude(index, k));
        y[e] = (signs[e / 8] >> (e % 8)) & 1 ? -m : m;
      }
    }
  }
}

// MXFP4: an E8M0 exponent byte, then 16 bytes of 4-bit E2M1 codes as Q4_0's nibbles;
// element = table[code] * scale (gguf_quants.h).
void mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_half_to_f32(b[0]);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kMxfp4Values[b[1 + j] & 0x0F]) * d;
    y[j + 16] = static_cast<float>(kMxfp4Values[b[1 + j] >> 4]) * d;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType t) {
  switch (t) {
    case T::Q4_0: return q4_0;
    case T::Q4_1: return q4_1;
    case T::Q5_0: return q5_0;
    case T::Q5_1: return q5_1;
    case T::Q8_0: return q8_0;
    case T::Q2_K: return q2_k;
    case T::Q3_K: return q3_k;
    case T::Q4_K: return q4_k;
    case T::Q5_K: return q5_k;
    case T::Q6_K: return q6_k;
    case T::Q8_K: return q8_k;
    case T::IQ4_NL: return iq4_nl;
    case T::IQ4_XS: return iq4_xs;
    case T::IQ3_S: return iq3_s;
    case T::MXFP4: return mxfp4;
    default: return nullptr;
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

GgmlTypeInfo ggml_type_info(GgmlType type) {
  if (auto t = ggml_type_info(static_cast<uint32_t>(type))) return *t;
  // Only a value cast from outside the enum gets here.
  return GgmlTypeInfo{type, "?", 1, 1};
}

const char* ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

std::optional<GgmlType> parse_ggml_type(std::string_view name) {
  for (const auto& t : kTypes)
    if (name == t.name) return t.type;
  return std::nullopt;
}

bool can_dequantize(GgmlType type) {
  return type == T::F32 || type == T::F16 || type == T::BF16 || block_fn(type) != nullptr;
}

int64_t ggml_row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo info = ggml_type_info(type);
  if (n < 0 || n % info.block_size != 0)
    fail("ggml", std::to_string(n) + " elements of " + info.name + " are not whole blocks of " +
                     std::to_string(info.block_size));
  // n comes from a file: a row of a zero-row tensor can be any length, so the product is checked.
  if (n / info.block_size > std::numeric_limits<int64_t>::max() / info.block_bytes)
    fail("ggml", "a row of " + std::to_string(n) + " " + info.name + " elements is too large");
  return n / info.block_size * info.block_bytes;
}

void dequantize_row(GgmlType type, const void* src, int64_t n, float* out) {
  const auto* p = static_cast<const uint8_t*>(src);
  const GgmlTypeInfo info = ggml_type_info(type);
  if (!can_dequantize(type))
    fail("ggml", std::string("dequantization of ") + info.name +
                     " is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, "
                     "Q6_K, Q8_K, IQ4_NL, IQ4_XS, IQ3_S, MXFP4)");
  ggml_row_bytes(type, n);  // checks whole blocks
  switch (type) {
    case T::F32: std::memcpy(out, p, static_cast<size_t>(n) * 4); return;
    case T::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = load_f16(p + 2 * i);
      return;
    case T::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(p + 2 * i));
      return;
    default: break;
  }
  const BlockFn fn = block_fn(type);
  for (int64_t b = 0; b < n / info.block_size; ++b) fn(p + b * info.block_bytes, out + b * info.block_size);
}

namespace {

void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

}  // namespace

bool can_quantize(GgmlType type) {
  return type == T::F32 || type == T::F16 || type == T::BF16 || can_quantize_ref(type);
}

void quantize_row(GgmlType type, const float* src, int64_t n, void* dst) {
  auto* p = static_cast<uint8_t*>(dst);
  if (!can_quantize(type))
    fail("ggml", std::string("writing ") + ggml_type_name(type) +
                     " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  ggml_row_bytes(type, n);  // checks whole blocks
  switch (type) {
    case T::F32: std::memcpy(p, src, static_cast<size_t>(n) * 4); return;
    case T::F16:
      for (int64_t i = 0; i < n; ++i) store_u16(p + 2 * i, f32_to_f16(src[i]));
      return;
    case T::BF16:
      for (int64_t i = 0; i < n; ++i) store_u16(p + 2 * i, f32_to_bf16(src[i]));
      return;
    case T::Q4_K: quantize_q4_k_row_ggml(src, n, p); return;
    default: quantize_row_ref(type, src, n, p); return;
  }
}

}  // namespace ember::kernels
