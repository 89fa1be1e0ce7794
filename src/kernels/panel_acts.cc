// The panel kernels' prefill activations (PanelActsLayout in matmul_impl.h): each block's register
// tiles transposed, once per product, so that a tile's broadcasts walk one contiguous stream.
#include <algorithm>

#include "base/dtype.h"
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

namespace {

// Calls f(x_row, at, s, t, len) for each token t of each register tile (s tokens) of pieces [p0, p1):
// x_row, the token's `len` activations of the piece's column block; at, where its tile starts in the
// packed layout, counted in floats.
template <class F>
void for_each_tile_token(PanelActsLayout l, const float* x, int64_t n, int64_t cols, int64_t p0, int64_t p1, F&& f) {
  const int64_t col_blocks = (cols + l.col_block - 1) / l.col_block;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t t0 = p / col_blocks * kTokenBlock, k0 = p % col_blocks * l.col_block;
    const int64_t nt = std::min(kTokenBlock, n - t0), len = std::min(l.col_block, cols - k0);
    int64_t start[kTokenBlock + 1];
    const int64_t tiles = panel_tile_starts(nt, l.tile_tokens, start);
    for (int64_t i = 0; i < tiles; ++i)
      for (int64_t t = 0; t < start[i + 1] - start[i]; ++t)
        f(x + (t0 + start[i] + t) * cols + k0, t0 * cols + nt * k0 + start[i] * len, start[i + 1] - start[i], t, len);
  }
}

}  // namespace

void pack_panel_acts(PanelActsLayout l, const float* x, int64_t n, int64_t cols, float* xp, int64_t p0, int64_t p1) {
  for_each_tile_token(l, x, n, cols, p0, p1, [&](const float* src, int64_t at, int64_t s, int64_t t, int64_t len) {
    for (int64_t k = 0; k < len; ++k) xp[at + k * s + t] = src[k];
  });
}

void pack_panel_acts_bf16(PanelActsLayout l, const float* x, int64_t n, int64_t cols, uint32_t* xp, int64_t p0,
                          int64_t p1) {
  for_each_tile_token(l, x, n, cols, p0, p1, [&](const float* src, int64_t at, int64_t s, int64_t t, int64_t len) {
    for (int64_t k = 0; k < len / 2; ++k)
      xp[at / 2 + k * s + t] = static_cast<uint32_t>(f32_to_bf16(src[2 * k])) << 16 | f32_to_bf16(src[2 * k + 1]);
  });
}

}  // namespace ember::kernels::detail
