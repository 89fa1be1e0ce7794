#pragma once
// The output gate of the hybrids' full-attention layers (Qwen3-Next, Qwen3.5): q_proj yields per head
// [query | gate] (head_dim each, not all queries then all gates), and the attention output is
// multiplied by sigmoid(gate) before o_proj.
#include <cstdint>

namespace ember::model {

// qg: [n][heads][2 * head_dim] -> q and gate: [n][heads][head_dim] each.
void split_query_gate(const float* qg, int64_t n, int64_t heads, int64_t head_dim, float* q, float* gate);
// x[i] *= sigmoid(gate[i]) for n values.
void apply_output_gate(float* x, const float* gate, int64_t n);

}  // namespace ember::model
