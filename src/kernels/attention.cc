#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/simd_avx2.h"

namespace ember::kernels {

namespace {

// q (float32) . b (a cached row of type T)
template <DType T>
inline float dot(const float* a, const void* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), simd::load8<T>(b, i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), simd::load8<T>(b, i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), simd::load8<T>(b, i), acc0);
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float s = _mm_cvtss_f32(h);
  for (; i < n; ++i) s += a[i] * simd::load1(b, T, i);
  return s;
}

// acc += w * v (v a cached row of type T)
template <DType T>
inline void axpy(float* acc, float w, const void* v, int64_t n) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, simd::load8<T>(v, i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * simd::load1(v, T, i);
}

// Element e of a cache block stored as T.
template <DType T>
inline const void* at(const void* block, int64_t e) {
  return static_cast<const uint8_t*>(block) + e * static_cast<int64_t>(dtype_size(T));
}

inline void scale(float* x, float r, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

// Positions whose scores are computed together: the running maximum (and the rescale of what was
// accumulated) is updated once per tile instead of once per position.
constexpr int64_t kTile = 32;

// All query heads of kv head `kvh` for one query token at position `pos`: each key and value row is
// read once for the whole group. `sc` holds kTile scores per query head, `m` and `l` the running
// maximum and sum per query head.
template <DType T>
void attend_group(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                  float* sc, float* m, float* l) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads, kv_stride = s.n_kv_heads * hd;
  const int64_t lo = s.sliding_window > 0 ? std::max<int64_t>(0, pos - s.sliding_window + 1) : 0;
  const float* qg = q + kvh * group * hd;
  float* og = out + kvh * group * hd;
  std::fill(og, og + group * hd, 0.0f);
  std::fill(m, m + group, -INFINITY);
  std::fill(l, l + group, 0.0f);
  for (int64_t p0 = lo; p0 <= pos; p0 += kTile) {
    const int64_t n = std::min(kTile, pos + 1 - p0);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = p0 + j;
      const void* k = at<T>(kv.k_blocks[p / kv.block_size], (p % kv.block_size) * kv_stride + kvh * hd);
      for (int64_t g = 0; g < group; ++g) sc[g * kTile + j] = dot<T>(qg + g * hd, k, hd) * s.scale;
    }
    for (int64_t g = 0; g < group; ++g) {
      float* e = sc + g * kTile;
      const float tmax = *std::max_element(e, e + n);
      if (tmax > m[g]) {  // rescale what was accumulated under the old maximum
        const float r = std::exp(m[g] - tmax);
        scale(og + g * hd, r, hd);
        l[g] *= r;
        m[g] = tmax;
      }
      for (int64_t j = 0; j < n; ++j) {
        e[j] = std::exp(e[j] - m[g]);
        l[g] += e[j];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = p0 + j;
      const void* v = at<T>(kv.v_blocks[p / kv.block_size], (p % kv.block_size) * kv_stride + kvh * hd);
      for (int64_t g = 0; g < group; ++g) axpy<T>(og + g * hd, sc[g * kTile + j], v, hd);
    }
  }
  for (int64_t g = 0; g < group; ++g) scale(og + g * hd, 1.0f / l[g], hd);
}

}  // namespace

void attention(const float* q, int64_t n_tokens, int64_t first_pos, const KvView& kv, const AttentionShape& s,
               float* out, ThreadPool& pool) {
  const AttentionItem item{q, n_tokens, first_pos, kv, out};
  attention(std::span<const AttentionItem>(&item, 1), s, pool);
}

void attention(std::span<const AttentionItem> items, const AttentionShape& s, ThreadPool& pool) {
  const int64_t q_stride = s.n_heads * s.head_dim;
  // Work unit = one query token x one kv head; first_unit[i] is item i's first unit.
  std::vector<int64_t> first_unit(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) first_unit[i + 1] = first_unit[i] + items[i].n_tokens * s.n_kv_heads;
  pool.parallel_for(first_unit.back(), 1, [&](int64_t u0, int64_t u1) {
    const size_t group = static_cast<size_t>(s.n_heads / s.n_kv_heads);
    std::vector<float> sc(kTile * group), m(group), l(group);
    size_t i = static_cast<size_t>(std::upper_bound(first_unit.begin(), first_unit.end(), u0) - first_unit.begin()) - 1;
    for (int64_t u = u0; u < u1; ++u) {
      while (u >= first_unit[i + 1]) ++i;
      const AttentionItem& it = items[i];
      const int64_t t = (u - first_unit[i]) / s.n_kv_heads, kvh = (u - first_unit[i]) % s.n_kv_heads;
      auto run = [&]<DType T>() {
        attend_group<T>(it.q + t * q_stride, it.first_pos + t, kvh, it.kv, s, it.out + t * q_stride, sc.data(),
                        m.data(), l.data());
      };
      switch (it.kv.dtype) {
        case DType::F32: run.template operator()<DType::F32>(); break;
        case DType::F16: run.template operator()<DType::F16>(); break;
        case DType::BF16: run.template operator()<DType::BF16>(); break;
      }
    }
  });
}

}  // namespace ember::kernels
