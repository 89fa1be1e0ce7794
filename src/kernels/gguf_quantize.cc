// ggml's reference quantizers (ggml-quants.c's quantize_row_*_ref, no importance matrix): what
// llama-quantize writes, so that a mix quantized at load or by `ember convert` rounds as llama.cpp's
// files do. Block layouts as gguf_quants.cc reads them.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gguf_quants.h"

namespace ember::kernels {

namespace {

using T = GgmlType;

// Below this a group's largest magnitude counts as zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (ggml's nearest_int adds 1.5 * 2^23).
int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }

// The value of largest magnitude, sign kept (the first of equal magnitudes).
float signed_amax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

void ref_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(b, f32_to_f16(d));
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
}

// Q4_0 / Q5_0: scale = -(value of largest magnitude) / 2^(bits-1), quants offset by 2^(bits-1),
// truncated after adding offset + 0.5 and capped at the top code. Q5_0's fifth bits go to a qh word.
template <int kBits>
void ref_symmetric(const float* x, uint8_t* b) {
  constexpr int kOff = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  const float d = signed_amax(x, 32) / -static_cast<float>(kOff), id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(b, f32_to_f16(d));
  uint8_t* qs = b + (kBits == 5 ? 6 : 2);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j] * id + (kOff + 0.5f))));
    const int hi = std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + (kOff + 0.5f))));
    qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << j | static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  if (kBits == 5) std::memcpy(b + 2, &qh, 4);
}

// Q5_1: d = (max - min) / 31, m = min, quants (x - min) / d + 0.5 truncated.
void ref_q5_1(const float* x, uint8_t* b) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  const float d = (hi - lo) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(b, f32_to_f16(d));
  put_u16(b + 2, f32_to_f16(lo));
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f), q1 = static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f);
    b[8 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j | static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(b + 4, &qh, 4);
}

// ggml's make_qx_quants with rmse_type 1 (weights x^2): signed quants L in [0, 2 nmax) (offset nmax)
// and their scale, the best least-squares fit over 19 trial steps around nmax / amax.
float fit_signed(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_amax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill_n(L, n, int8_t{0});
    return 0.0f;
  }
  auto quant = [nmax](float iscale, float v) { return std::clamp(nearest(iscale * v), -nmax, nmax - 1); };
  // Sums of w*x*l and w*l*l for the quants of `iscale`.
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(quant(iscale, x[i]));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto keep = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + quant(iscale, x[i]));
  };
  float iscale = -static_cast<float>(nmax) / max, sumlx, suml2;
  sums(iscale, sumlx, suml2);
  keep(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      keep(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_qkx2_quants without mean absolute error: unsigned quants L in [0, nmax] of x = scale * L
// - min, the weighted least-squares fit over nstep + 1 trial steps (nmax + rmin + rdelta * is) of
// the range; min (returned through the_min, as a positive offset) never below 0 in x.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min, float rmin, float rdelta,
                 int nstep) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  min = std::min(min, 0.0f);
  if (max == min) {
    std::fill_n(L, n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  auto quant = [&](float iscale, float v) { return std::clamp(nearest(iscale * (v - min)), 0, nmax); };
  float iscale = static_cast<float>(nmax) / (max - min), scale = 1.0f / iscale, best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(quant(iscale, x[i]));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t aux[32];
  // Each trial's range starts at the best min so far, as ggml's does.
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = quant(iscale, x[i]);
      aux[i] = static_cast<uint8_t>(l);
      const auto lf = static_cast<float>(l);
      sum_l += w[i] * lf;
      sum_l2 += w[i] * lf * lf;
      sum_xl += w[i] * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0.0f) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(aux[i]) + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy_n(aux, n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

// Q4_K (kBits 4) / Q5_K (5): per sub-block of 32 an affine fit weighted by rms + |x|, its scale and
// min rounded to 6 bits of the super-block's float16 d and dmin, then every quant rounded again
// against the stored scale and min.
template <int kBits>
void ref_affine_k(const float* x, uint8_t* b) {
  constexpr int kTop = (1 << kBits) - 1;
  uint8_t L[kQK_K];
  float scales[8], mins[8], w[32], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = kBits == 4 ? fit_affine(32, kTop, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20)
                           : fit_affine(32, kTop, xs, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t* s = b + 4;  // the 12 bytes kquant_scale_min unpacks
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest(inv_scale * scales[j]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest(inv_min * mins[j]))));
    if (j < 4) {
      s[j] = static_cast<uint8_t>(ls);
      s[j + 4] = static_cast<uint8_t>(lm);
    } else {
      s[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  put_u16(b, f32_to_f16(max_scale / 63.0f));
  put_u16(b + 2, f32_to_f16(max_min / 63.0f));
  const float d_all = f16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
  const float dmin_all = f16_to_f32(static_cast<uint16_t>(b[2] | (b[3] << 8)));
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    kquant_scale_min(j, s, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest((x[32 * j + l] + dm) / d), 0, kTop));
  }
  // 64 weights share 32 bytes: the first 32 in the low nibbles; Q5_K's bit 4 of weight 32j + l is bit
  // j of qh[l].
  uint8_t* qh = b + 16;
  uint8_t* qs = b + (kBits == 5 ? 48 : 16);
  if (kBits == 5) std::memset(qh, 0, 32);
  for (int pair = 0; pair < 4; ++pair)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * pair + l], hi = L[64 * pair + 32 + l];
      qs[32 * pair + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      if (kBits == 5) qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * pair)) | ((hi >> 4) << (2 * pair + 1)));
    }
}

// Q6_K: per sub-block of 16 a signed fit (make_qx_quants, nmax 32), the scales as signed bytes of the
// float16 d = -(scale of largest magnitude) / 128, every quant rounded again against the stored scale.
void ref_q6_k(const float* x, uint8_t* b) {
  int8_t L[kQK_K];
  float scales[16], max_scale = 0.0f, max_abs = 0.0f;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = fit_signed(16, 32, x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs) max_abs = std::fabs(scales[ib]), max_scale = scales[ib];
  }
  std::memset(b, 0, 210);
  if (max_abs < kGroupMaxEps) return;  // all zero (d = +0)
  const float iscale = -128.0f / max_scale;
  put_u16(b + 208, f32_to_f16(1.0f / iscale));
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[ib])));
  const float d_all = f16_round(1.0f / iscale);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) L[16 * j + l] = static_cast<int8_t>(32 + std::clamp(nearest(x[16 * j + l] / d), -32, 31));
  }
  // Each half of 128: element 32k + l in the low (k < 2) or high nibble of ql[l + 32 (k % 2)], its
  // bits 4-5 at bits 2k of qh[l].
  for (int half = 0; half < 2; ++half) {
    uint8_t* ql = b + 64 * half;
    uint8_t* qh = b + 128 + 32 * half;
    const int8_t* q = L + 128 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((q[l] & 0x0F) | ((q[l + 64] & 0x0F) << 4));
      ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0x0F) | ((q[l + 96] & 0x0F) << 4));
      qh[l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
    }
  }
}

using QuantizeFn = void (*)(const float*, uint8_t*);

QuantizeFn quantize_fn(GgmlType t) {
  switch (t) {
    case T::Q8_0: return ref_q8_0;
    case T::Q4_0: return ref_symmetric<4>;
    case T::Q5_0: return ref_symmetric<5>;
    case T::Q5_1: return ref_q5_1;
    case T::Q4_K: return ref_affine_k<4>;
    case T::Q5_K: return ref_affine_k<5>;
    case T::Q6_K: return ref_q6_k;
    default: return nullptr;
  }
}

}  // namespace

bool can_quantize_ref(GgmlType type) { return quantize_fn(type) != nullptr; }

void quantize_row_ref(GgmlType type, const float* src, int64_t n, void* dst) {
  const QuantizeFn fn = quantize_fn(type);
  const GgmlTypeInfo info = ggml_type_info(type);
  if (fn == nullptr)
    fail("ggml", std::string("ggml's reference quantization to ") + info.name +
                     " is not supported (supported: Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  ggml_row_bytes(type, n);  // checks whole blocks
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / info.block_size; ++b) fn(src + b * info.block_size, p + b * info.block_bytes);
}

}  // namespace ember::kernels
