#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include <immintrin.h>

#include "kernels/exp.h"

namespace ember::kernels {

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* o = out + t * dim;
    // Squares summed in double (exact enough for long rows) in two 4-lane chains: one sequential
    // double chain costs its add latency per element, more than the rest of the norm.
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(xr + i)), hi = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 4));
      a0 = _mm256_fmadd_pd(lo, lo, a0);
      a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
    double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* x, const float* bias, int64_t n, int64_t dim) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < dim; ++i) x[t * dim + i] += bias[i];
}

void silu_mul(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + exp_det(-g)) * up[i];
  }
}

void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t j = 0; j < half; ++j) {
      const float a = v[j], b = v[j + half];
      v[j] = a * cos[j] - b * sin[j];
      v[j + half] = b * cos[j] + a * sin[j];
    }
  }
}

void store_row(const float* src, int64_t n, DType to, void* dst) {
  if (to == DType::F32) {
    std::copy_n(src, n, static_cast<float*>(dst));
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  if (to == DType::F16)
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = to == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
}

void softmax(float* x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace ember::kernels
