#pragma once
// Internal: the delta rule (delta_rule.h) over a vector type V, shared by the scalar reference
// (delta_rule.cc, one lane) and the AVX2 and AVX-512 files. Every S element's arithmetic is the same
// sequence of float operations whatever the width: the loops run along value_dim, each lane one
// column of S, and the sums over key_dim run in order with one fused multiply-add per step, so all
// instruction sets give the same bits.
#include <cmath>
#include <cstdint>

#include "kernels/delta_rule.h"

namespace ember::kernels::detail {

// One lane: the reference, and the tails of the wide ones.
struct ScalarLane {
  using F = float;
  static constexpr int64_t kLanes = 1;
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F set1(float x) { return x; }
  static F zero() { return 0.0f; }
  static F mul(F a, F b) { return a * b; }
  static F sub(F a, F b) { return a - b; }
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
};

// Columns [j0, j0 + V::kLanes * blocks) of one position: decay S and form u = beta (v - S^T k), then
// S += k u^T and o = S^T q. Up to kBlock vectors of columns are held in registers at once.
template <class V, int kBlock>
inline void delta_columns(float* S, int64_t dk, int64_t dv, int64_t j0, int blocks, const float* q, const float* k,
                          const float* v, float decay, float beta, float* out) {
  using F = typename V::F;
  F u[kBlock], o[kBlock];
  const F d = V::set1(decay);
  for (int b = 0; b < blocks; ++b) u[b] = V::zero();
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv + j0;
    const F ki = V::set1(k[i]);
    for (int b = 0; b < blocks; ++b) {
      const F s = V::mul(V::load(row + b * V::kLanes), d);
      V::store(row + b * V::kLanes, s);
      u[b] = V::fma(s, ki, u[b]);
    }
  }
  const F bt = V::set1(beta);
  for (int b = 0; b < blocks; ++b) {
    u[b] = V::mul(bt, V::sub(V::load(v + j0 + b * V::kLanes), u[b]));
    o[b] = V::zero();
  }
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv + j0;
    const F ki = V::set1(k[i]), qi = V::set1(q[i]);
    for (int b = 0; b < blocks; ++b) {
      const F s = V::fma(ki, u[b], V::load(row + b * V::kLanes));
      V::store(row + b * V::kLanes, s);
      o[b] = V::fma(s, qi, o[b]);
    }
  }
  for (int b = 0; b < blocks; ++b) V::store(out + j0 + b * V::kLanes, o[b]);
}

// The columns in vectors of V, kBlock at a time, the rest one lane at a time.
template <class V, int kBlock>
void delta_rule_impl(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    const float* q = h.q + t * h.qk_stride;
    const float* k = h.k + t * h.qk_stride;
    const float* v = h.v + t * h.v_stride;
    const float decay = h.decay[t * h.gate_stride], beta = h.beta[t * h.gate_stride];
    float* out = h.out + t * h.out_stride;
    int64_t j = 0;
    for (; j + kBlock * V::kLanes <= dv; j += kBlock * V::kLanes)
      delta_columns<V, kBlock>(S, dk, dv, j, kBlock, q, k, v, decay, beta, out);
    for (; j + V::kLanes <= dv; j += V::kLanes) delta_columns<V, kBlock>(S, dk, dv, j, 1, q, k, v, decay, beta, out);
    for (; j < dv; ++j) delta_columns<ScalarLane, 1>(S, dk, dv, j, 1, q, k, v, decay, beta, out);
  }
}

void delta_rule_avx2(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n);
void delta_rule_avx512(float* S, int64_t dk, int64_t dv, const DeltaRuleHead& h, int64_t n);

}  // namespace ember::kernels::detail
