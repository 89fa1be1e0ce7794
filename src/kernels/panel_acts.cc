// The panel kernels' prefill activations (PanelActsLayout in matmul_impl.h): each block's register
// tiles transposed, once per product, so that a tile's broadcasts walk one contiguous stream.
#include <algorithm>

#include "kernels/matmul_impl.h"

namespace ember::kernels::detail {

int64_t panel_tile_starts(int64_t nt, int64_t tile_tokens, int64_t* start) {
  const int64_t tiles = (nt + tile_tokens - 1) / tile_tokens;
  for (int64_t i = 0, t = 0; i <= tiles; ++i) {
    start[i] = t;
    if (i < tiles) t += (nt - t) / (tiles - i);
  }
  return tiles;
}

int64_t panel_pack_pieces(PanelActsLayout l, int64_t n, int64_t cols) {
  return (n + kTokenBlock - 1) / kTokenBlock * ((cols + l.col_block - 1) / l.col_block);
}

void pack_panel_acts(PanelActsLayout l, const float* x, int64_t n, int64_t cols, float* xp, int64_t p0, int64_t p1) {
  const int64_t col_blocks = (cols + l.col_block - 1) / l.col_block;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t t0 = p / col_blocks * kTokenBlock, k0 = p % col_blocks * l.col_block;
    const int64_t nt = std::min(kTokenBlock, n - t0), len = std::min(l.col_block, cols - k0);
    int64_t start[kTokenBlock + 1];
    const int64_t tiles = panel_tile_starts(nt, l.tile_tokens, start);
    float* block = xp + t0 * cols + nt * k0;
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t s = start[i + 1] - start[i];
      float* dst = block + start[i] * len;
      for (int64_t t = 0; t < s; ++t) {
        const float* src = x + (t0 + start[i] + t) * cols + k0;
        for (int64_t k = 0; k < len; ++k) dst[k * s + t] = src[k];
      }
    }
  }
}

}  // namespace ember::kernels::detail
