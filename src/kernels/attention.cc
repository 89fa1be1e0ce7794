#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::kernels {

namespace {

inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, acc);
  float s = ((tmp[0] + tmp[4]) + (tmp[1] + tmp[5])) + ((tmp[2] + tmp[6]) + (tmp[3] + tmp[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// acc = acc * scale + w * v
inline void scale_add(float* acc, float scale, float w, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] * scale + w * v[i];
}

}  // namespace

void attention(const float* q, int64_t n_tokens, int64_t first_pos, const KvView& kv, const AttentionShape& s,
               float* out, ThreadPool& pool) {
  const int64_t hd = s.head_dim;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t q_stride = s.n_heads * hd;
  const int64_t kv_stride = s.n_kv_heads * hd;
  // One work item = one query token x one query head.
  pool.parallel_for(n_tokens * s.n_heads, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t t = w / s.n_heads, h = w % s.n_heads, kvh = h / group;
      const int64_t pos = first_pos + t;
      const int64_t lo = s.sliding_window > 0 ? std::max<int64_t>(0, pos - s.sliding_window + 1) : 0;
      const float* qv = q + t * q_stride + h * hd;
      float* o = out + t * q_stride + h * hd;
      std::fill(o, o + hd, 0.0f);
      float m = -INFINITY, l = 0.0f;
      for (int64_t p = lo; p <= pos; ++p) {
        const int64_t b = p / kv.block_size, slot = p % kv.block_size;
        const float* k = kv.k_blocks[b] + slot * kv_stride + kvh * hd;
        const float* v = kv.v_blocks[b] + slot * kv_stride + kvh * hd;
        const float sc = dot(qv, k, hd) * s.scale;
        if (sc > m) {
          const float r = std::exp(m - sc);  // rescale what was accumulated under the old maximum
          scale_add(o, r, 1.0f, v, hd);
          l = l * r + 1.0f;
          m = sc;
        } else {
          const float e = std::exp(sc - m);
          scale_add(o, 1.0f, e, v, hd);
          l += e;
        }
      }
      const float inv = 1.0f / l;
      for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
    }
  });
}

}  // namespace ember::kernels
