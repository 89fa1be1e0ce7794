// Dispatch of the operations with SIMD loops (ops_avx2.cc, also on AVX-512 machines) and their
// scalar references; the other operations are plain loops.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops_impl.h"

namespace ember::kernels {

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  rms_norm(x, weight, n, dim, eps, out, best_isa());
}

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out, Isa isa) {
  require_isa(isa, "rms_norm");
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* o = out + t * dim;
    double ss = 0.0;
    if (isa == Isa::Scalar) {
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    } else {
      ss = detail::sum_squares_avx2(xr, dim);
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* x, const float* bias, int64_t n, int64_t dim) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < dim; ++i) x[t * dim + i] += bias[i];
}

void silu_mul(float* gate, const float* up, int64_t n) { silu_mul(gate, up, n, best_isa()); }

void silu_mul(float* gate, const float* up, int64_t n, Isa isa) {
  require_isa(isa, "silu_mul");
  if (isa != Isa::Scalar) {
    detail::silu_mul_avx2(gate, up, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) gate[i] = detail::silu_mul1(gate[i], up[i]);
}

void clamped_swiglu_mul(float* gate, const float* up, int64_t n, float limit, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    gate[i] = (u + 1.0f) * (g / (1.0f + exp_det(-alpha * g)));
  }
}

void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  rope_rotate_half(x, n_heads, head_dim, head_dim, cos, sin);
}

void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos, const float* sin) {
  const int64_t half = rot_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t j = 0; j < half; ++j) {
      const float a = v[j], b = v[j + half];
      v[j] = a * cos[j] - b * sin[j];
      v[j + half] = b * cos[j] + a * sin[j];
    }
  }
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void scale_inplace(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

void store_row(const float* src, int64_t n, DType to, void* dst) { store_row(src, n, to, dst, best_isa()); }

void store_row(const float* src, int64_t n, DType to, void* dst, Isa isa) {
  require_isa(isa, "store_row");
  if (to == DType::F32) {
    std::copy_n(src, n, static_cast<float*>(dst));
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (to == DType::F16 && isa != Isa::Scalar) {
    detail::to_f16_avx2(src, n, d);
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i] = to == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
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
