#pragma once
// Depthwise causal 1-D convolution followed by SiLU (the conv of a Gated DeltaNet layer).
#include <cstdint>

namespace ember::kernels {

// x holds kernel - 1 + n rows of `channels` values: the window of earlier inputs (oldest first, zeros
// before a sequence's first position), then the n new ones. For each new row t and channel c:
//   out[t][c] = silu(sum_j w[c][j] * x[t + j][c]),  j in [0, kernel)  (no flip, no bias).
void causal_conv_silu(const float* x, const float* w, int64_t n, int64_t channels, int64_t kernel, float* out);

}  // namespace ember::kernels
