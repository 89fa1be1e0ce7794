#pragma once
// The gated delta rule of linear attention (Gated DeltaNet), per value head with a state S of
// [key_dim][value_dim] floats: at each position
//   S = decay * S;  u = beta * (v - S^T k);  S += k u^T;  o = S^T q.
// Positions run strictly in order, each updating S in place, so the result has the same bits however
// a prompt is split into passes and whatever else shares them (and on every instruction set).
#include <cstdint>

#include "kernels/cpu.h"

namespace ember::kernels {

// One head's inputs and output over n positions, each array advancing by its stride per position.
struct DeltaRuleHead {
  const float* q = nullptr;  // [key_dim], already normalised and scaled
  const float* k = nullptr;  // [key_dim], normalised
  int64_t qk_stride = 0;
  const float* v = nullptr;  // [value_dim]
  int64_t v_stride = 0;
  const float* decay = nullptr;  // exp(g) per position
  const float* beta = nullptr;   // per position
  int64_t gate_stride = 0;
  float* out = nullptr;  // [value_dim]
  int64_t out_stride = 0;
};

// Runs the n positions on `state` ([key_dim][value_dim]), in place; the best instruction set, or the
// one given (tests run every supported one: all give the same bits, the scalar one is the reference).
void delta_rule(float* state, int64_t key_dim, int64_t value_dim, const DeltaRuleHead& h, int64_t n);
void delta_rule(float* state, int64_t key_dim, int64_t value_dim, const DeltaRuleHead& h, int64_t n, Isa isa);

}  // namespace ember::kernels
