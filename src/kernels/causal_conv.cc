#include "kernels/causal_conv.h"

#include <cmath>

namespace ember::kernels {

void causal_conv_silu(const float* x, const float* w, int64_t n, int64_t channels, int64_t kernel, float* out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      float s = 0;
      for (int64_t j = 0; j < kernel; ++j) s += w[c * kernel + j] * x[(t + j) * channels + c];
      out[t * channels + c] = s / (1.0f + std::exp(-s));
    }
}

}  // namespace ember::kernels
