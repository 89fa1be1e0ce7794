#include "kernels/kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/dtype.h"

namespace ember::kernels {

namespace {

// One super-block decoded: unsigned quants, the scale and min of each sub-block (Q6_K: min = 32 *
// scale, so that weight = d * (sc * q - m) for every type) and the float16 bits of d and dmin.
struct KqParts {
  uint8_t q[kQK_K];
  int sc[16], m[16];
  int sub = 32;  // weights per sub-block
  uint16_t d = 0, dmin = 0;
};

uint16_t kq_load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void kq_store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// ggml's super-block (layouts in gguf_quants.cc) to parts.
void kq_parts_from_ggml(QType q, const uint8_t* b, KqParts& p) {
  if (q == QType::Q6_K) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    p.sub = 16;
    p.d = kq_load_u16(b + 208);
    for (int j = 0; j < 16; ++j) p.sc[j] = static_cast<int8_t>(b[192 + j]), p.m[j] = 32 * p.sc[j];
    for (int e = 0; e < kQK_K; ++e) {  // half e / 128; within it 32k + l
      const int half = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lo = ql[64 * half + l + 32 * (k % 2)];
      p.q[e] = static_cast<uint8_t>((k < 2 ? lo & 0x0F : lo >> 4) | (((qh[32 * half + l] >> (2 * k)) & 3) << 4));
    }
    return;
  }
  p.d = kq_load_u16(b);
  p.dmin = kq_load_u16(b + 2);
  for (int j = 0; j < 8; ++j) kquant_scale_min(j, b + 4, p.sc[j], p.m[j]);
  const bool five = q == QType::Q5_K;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five ? 48 : 16);
  for (int e = 0; e < kQK_K; ++e) {  // 64 weights per 32 bytes: low nibbles first, then high
    const uint8_t byte = qs[32 * (e / 64) + e % 32];
    const int low = (e % 64) < 32 ? byte & 0x0F : byte >> 4;
    p.q[e] = static_cast<uint8_t>(low | (five ? ((qh[e % 32] >> (e / 32)) & 1) << 4 : 0));
  }
}

// Nibbles of q (low 4 bits) in Ember's order: byte 64h + i holds q[128h + i] and q[128h + 64 + i].
void kq_put_nibbles(const uint8_t* q, uint8_t* dst) {
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 64; ++i)
      dst[64 * h + i] = static_cast<uint8_t>((q[128 * h + i] & 0x0F) | ((q[128 * h + 64 + i] & 0x0F) << 4));
}

void kq_parts_to_ember(QType q, const KqParts& p, uint8_t* dst) {
  std::memset(dst, 0, static_cast<size_t>(kq_block_bytes(q)));
  kq_store_u16(dst, p.d);
  if (q == QType::Q6_K) {
    for (int j = 0; j < 16; ++j) dst[kKq6Scales + j] = static_cast<uint8_t>(static_cast<int8_t>(p.sc[j]));
    kq_put_nibbles(p.q, dst + kKq6Ql);
    for (int e = 0; e < kQK_K; ++e) dst[kKq6Qh + e % 64] |= static_cast<uint8_t>(((p.q[e] >> 4) & 3) << (2 * (e / 64)));
    return;
  }
  kq_store_u16(dst + 2, p.dmin);
  for (int j = 0; j < 8; ++j) {
    dst[kKqScales + j] = static_cast<uint8_t>(p.sc[j]);
    dst[kKqScales + 8 + j] = static_cast<uint8_t>(p.m[j]);
  }
  kq_put_nibbles(p.q, dst + kKqQs);
  if (q == QType::Q5_K)
    for (int e = 0; e < kQK_K; ++e) dst[kKq5Qh + e / 8] |= static_cast<uint8_t>(((p.q[e] >> 4) & 1) << (e % 8));
}

// Ember's super-block to parts.
void kq_parts_from_ember(QType q, const uint8_t* b, KqParts& p) {
  p.d = kq_load_u16(b);
  const uint8_t* qs = b + (q == QType::Q6_K ? kKq6Ql : kKqQs);
  for (int e = 0; e < kQK_K; ++e) {
    const uint8_t byte = qs[64 * (e / 128) + e % 64];
    p.q[e] = (e % 128) < 64 ? byte & 0x0F : byte >> 4;
  }
  if (q == QType::Q6_K) {
    p.sub = 16;
    for (int j = 0; j < 16; ++j) p.sc[j] = static_cast<int8_t>(b[kKq6Scales + j]), p.m[j] = 32 * p.sc[j];
    for (int e = 0; e < kQK_K; ++e) p.q[e] |= static_cast<uint8_t>(((b[kKq6Qh + e % 64] >> (2 * (e / 64))) & 3) << 4);
    return;
  }
  p.sub = 32;
  p.dmin = kq_load_u16(b + 2);
  for (int j = 0; j < 8; ++j) p.sc[j] = b[kKqScales + j], p.m[j] = b[kKqScales + 8 + j];
  if (q == QType::Q5_K)
    for (int e = 0; e < kQK_K; ++e) p.q[e] |= static_cast<uint8_t>(((b[kKq5Qh + e / 8] >> (e % 8)) & 1) << 4);
}

}  // namespace

QType kquant_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return QType::Q4_K;
    case GgmlType::Q5_K: return QType::Q5_K;
    case GgmlType::Q6_K: return QType::Q6_K;
    default: return QType::None;
  }
}

void repack_kquant_block(QType q, const uint8_t* src, uint8_t* dst) {
  KqParts p;
  kq_parts_from_ggml(q, src, p);
  kq_parts_to_ember(q, p, dst);
}

void dequantize_kquant_row(QType q, const uint8_t* row, int64_t cols, float* out) {
  KqParts p;
  for (int64_t b = 0; b < cols / kQK_K; ++b, out += kQK_K) {
    kq_parts_from_ember(q, row + b * kq_block_bytes(q), p);
    const float d = f16_to_f32(p.d), dmin = f16_to_f32(p.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / p.sub;
      if (q == QType::Q6_K) {  // ggml's order: (d * scale) * (q - 32)
        out[e] = d * static_cast<float>(p.sc[j]) * static_cast<float>(p.q[e] - 32);
      } else {  // d * scale and dmin * min rounded first, then the product and difference apart
        const float dl = d * static_cast<float>(p.sc[j]), ml = dmin * static_cast<float>(p.m[j]);
        const float scaled = dl * static_cast<float>(p.q[e]);
        out[e] = scaled - ml;
      }
    }
  }
}

void quantize_acts_k(const float* x, int64_t n, int64_t cols, KQuantActs& out) {
  const int64_t nb = cols / kQK_K;
  out.n = n;
  out.cols = cols;
  out.n_blocks = nb;
  out.q.resize(static_cast<size_t>(n * cols));
  out.d.resize(static_cast<size_t>(n * nb));
  out.bsum.resize(static_cast<size_t>(n * nb * 16));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = x + t * cols + b * kQK_K;
      int8_t* q = out.q.data() + t * cols + b * kQK_K;
      // As ggml's Q8_K: the value of largest magnitude maps to -127, d = 1 / that inverse scale.
      float amax = 0.0f, mx = 0.0f;
      for (int64_t k = 0; k < kQK_K; ++k)
        if (std::fabs(v[k]) > amax) amax = std::fabs(v[k]), mx = v[k];
      const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
      for (int64_t k = 0; k < kQK_K; ++k) q[k] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * v[k])));
      out.d[t * nb + b] = amax != 0.0f ? 1.0f / iscale : 0.0f;
      int16_t* bs = out.bsum.data() + (t * nb + b) * 16;
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int k = 0; k < 16; ++k) s += q[16 * j + k];
        bs[j] = static_cast<int16_t>(s);
      }
    }
}

float kquant_row_dot(QType q, const uint8_t* row, const KQuantActs& a, int64_t t) {
  KqParts p;
  float s = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    kq_parts_from_ember(q, row + b * kq_block_bytes(q), p);
    const int8_t* xq = a.q.data() + t * a.cols + b * kQK_K;
    const int16_t* bs = a.bsum.data() + (t * a.n_blocks + b) * 16;
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < kQK_K / p.sub; ++j) {
      int32_t dot = 0, xs = 0;
      for (int k = 0; k < p.sub; ++k) dot += p.q[j * p.sub + k] * xq[j * p.sub + k];
      for (int k = 0; k < p.sub / 16; ++k) xs += bs[j * p.sub / 16 + k];
      isum += p.sc[j] * dot;
      msum += p.m[j] * xs;
    }
    const float dx = a.d[t * a.n_blocks + b];
    const float dm = q == QType::Q6_K ? f16_to_f32(p.d) : f16_to_f32(p.dmin);
    s += f16_to_f32(p.d) * dx * static_cast<float>(isum) - dm * dx * static_cast<float>(msum);
  }
  return s;
}

}  // namespace ember::kernels
