#pragma once
// Element-wise and row-wise operations of a transformer layer, all in float32. Those with SIMD loops
// also take an explicit instruction set (tests run every supported one; Scalar is the reference).
#include <cstdint>

#include "base/dtype.h"
#include "kernels/cpu.h"

namespace ember::kernels {

// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for n rows of length dim. out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out);
void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out, Isa isa);

// x[i] += y[i]
void add_inplace(float* x, const float* y, int64_t n);

// Adds bias[c] to every row of x ([n][dim]).
void add_bias(float* x, const float* bias, int64_t n, int64_t dim);

// gate[i] = silu(gate[i]) * up[i]
void silu_mul(float* gate, const float* up, int64_t n);
void silu_mul(float* gate, const float* up, int64_t n, Isa isa);

// Rotary embedding, Hugging Face "rotate half" convention: dimension j pairs with j + head_dim/2.
// x holds n_heads heads of head_dim values; cos/sin hold head_dim/2 values for this position.
void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);
// The same on the first rot_dim dims of each head (partial rotary: j pairs with j + rot_dim/2, the
// rest of the head is left as it is); cos/sin hold rot_dim/2 values.
void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos, const float* sin);

// gate[i] = gelu_tanh(gate[i]) * up[i], GELU with the tanh approximation (PyTorch's approximate="tanh").
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// gpt-oss's clamped SwiGLU: g = min(gate[i], limit), u = clamp(up[i], -limit, limit),
// gate[i] = (u + 1) * g * sigmoid(alpha * g).
void clamped_swiglu_mul(float* gate, const float* up, int64_t n, float limit, float alpha);

// x[i] *= s
void scale_inplace(float* x, float s, int64_t n);
// y[i] += a * x[i]
void axpy(float* y, float a, const float* x, int64_t n);
// x[i] = tanh(x[i] / cap) * cap (Gemma 2's soft-capping of scores and logits)
void softcap(float* x, int64_t n, float cap);

// dst[i] = src[i] converted to `to` (round to nearest even for F16 and BF16), e.g. into a KV cache.
void store_row(const float* src, int64_t n, DType to, void* dst);
void store_row(const float* src, int64_t n, DType to, void* dst, Isa isa);

// In-place softmax of one row.
void softmax(float* x, int64_t n);

}  // namespace ember::kernels
