#include "kernels/matmul.h"

#include <immintrin.h>

#include <algorithm>

namespace ember::kernels {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Loads 8 weights of any dtype as float32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p, DType t) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (t == DType::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16
}

inline float to_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.0f;
}

// Computes up to 4 tokens against one weight row at a time so each weight load is reused.
template <typename W>
void rows_kernel(const W* w, DType t, int64_t cols, const float* x, int64_t n_tokens, int64_t rows,
                 int64_t r0, int64_t r1, float* y) {
  const int64_t c8 = cols & ~int64_t{7};
  for (int64_t r = r0; r < r1; ++r) {
    const W* wr = w + r * cols;
    int64_t tok = 0;
    for (; tok + 4 <= n_tokens; tok += 4) {
      const float* x0 = x + tok * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t c = 0; c < c8; c += 8) {
        __m256 wv;
        if constexpr (std::is_same_v<W, float>) wv = load8(wr + c);
        else wv = load8(wr + c, t);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + c), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + cols + c), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 2 * cols + c), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 3 * cols + c), a3);
      }
      float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int64_t c = c8; c < cols; ++c) {
        const float wc = to_f32(w, t, r * cols + c);
        for (int k = 0; k < 4; ++k) s[k] += wc * x0[k * cols + c];
      }
      for (int k = 0; k < 4; ++k) y[(tok + k) * rows + r] = s[k];
    }
    for (; tok < n_tokens; ++tok) {
      const float* xt = x + tok * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      int64_t c = 0;
      for (; c + 16 <= c8; c += 16) {
        if constexpr (std::is_same_v<W, float>) {
          a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(xt + c), a0);
          a1 = _mm256_fmadd_ps(load8(wr + c + 8), _mm256_loadu_ps(xt + c + 8), a1);
        } else {
          a0 = _mm256_fmadd_ps(load8(wr + c, t), _mm256_loadu_ps(xt + c), a0);
          a1 = _mm256_fmadd_ps(load8(wr + c + 8, t), _mm256_loadu_ps(xt + c + 8), a1);
        }
      }
      for (; c < c8; c += 8) {
        if constexpr (std::is_same_v<W, float>) a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(xt + c), a0);
        else a0 = _mm256_fmadd_ps(load8(wr + c, t), _mm256_loadu_ps(xt + c), a0);
      }
      float s = hsum(_mm256_add_ps(a0, a1));
      for (; c < cols; ++c) s += to_f32(w, t, r * cols + c) * xt[c];
      y[tok * rows + r] = s;
    }
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  // Enough rows per chunk that a chunk is worth a thread hand-off (~16K multiply-adds).
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, w.cols * n_tokens));
  pool.parallel_for(w.rows, grain, [&](int64_t r0, int64_t r1) {
    if (w.dtype == DType::F32)
      rows_kernel(static_cast<const float*>(w.data), w.dtype, w.cols, x, n_tokens, w.rows, r0, r1, y);
    else
      rows_kernel(static_cast<const uint16_t*>(w.data), w.dtype, w.cols, x, n_tokens, w.rows, r0, r1, y);
  });
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < w.rows; ++r) {
      float s = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) s += to_f32(w.data, w.dtype, r * w.cols + c) * x[t * w.cols + c];
      y[t * w.rows + r] = s;
    }
}

void copy_row(const WeightMatrix& w, int64_t row, float* out) {
  for (int64_t c = 0; c < w.cols; ++c) out[c] = to_f32(w.data, w.dtype, row * w.cols + c);
}

}  // namespace ember::kernels
