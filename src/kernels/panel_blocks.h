#pragma once
// Internal: the order in which the AVX-512 panel kernels (matmul_panel_avx512.cc,
// matmul_panel_bf16_avx512.cc) visit the column blocks of their groups of panels in prefill, and how a
// tile fetches the next block into L2 while it computes: the next group's panels start pages of their
// own, where the hardware prefetcher does not follow.
#include <algorithm>
#include <cstdint>

#include "kernels/matmul_impl.h"
#include "kernels/pack.h"

namespace ember::kernels::detail {

// One line into L2. (An asm statement: GCC 12 deletes _mm_prefetch loops nested in another loop,
// attention_simd.h.)
struct PrefetchL2 {
  void operator()(const char* line) const { asm volatile("prefetcht1 %0" : : "m"(*line)); }
};

// A token tile's share of the block: tile i of `tiles` takes lines [i L / tiles, (i + 1) L / tiles) of
// each panel's L and fetches one line of every panel at evenly spaced steps of its column loop.
// (Before, a burst of fetches with a division per line ran before each tile and the block's
// conversion after it, in the caller: together 15-18% of the f16 and bf16 products' time at one
// thread, Zen 4.) Fetch: what fetches a line (tests record them).
template <class Fetch = PrefetchL2>
class BasicBlockFetch {
 public:
  BasicBlockFetch() = default;
  // np panels of `bytes` each from `next`, `stride` bytes apart; a tile loop of `steps` steps.
  BasicBlockFetch(const void* next, int64_t stride, int np, int64_t bytes, int64_t i, int64_t tiles, int64_t steps,
                  Fetch fetch = {})
      : fetch_(fetch) {
    const int64_t lines = bytes / kCacheLine, first = i * lines / tiles, count = (i + 1) * lines / tiles - first;
    if (np <= 0 || count <= 0) return;
    line_ = static_cast<const char*>(next) + first * kCacheLine;
    stride_ = stride;
    np_ = np;
    left_ = count;
    every_ = std::max<int64_t>(1, steps / count);
    due_ = 0;
  }

  // Called at each step k of the tile's loop, in order.
  [[gnu::always_inline]] void at_step(int64_t k) {
    if (k != due_) return;
    for (int p = 0; p < np_; ++p) fetch_(line_ + p * stride_);
    line_ += kCacheLine;
    due_ = --left_ > 0 ? due_ + every_ : -1;
  }

  // After the loop: the lines a loop shorter than the share did not reach.
  void finish() {
    for (; left_ > 0; --left_, line_ += kCacheLine)
      for (int p = 0; p < np_; ++p) fetch_(line_ + p * stride_);
  }

 private:
  const char* line_ = nullptr;
  int64_t stride_ = 0, left_ = 0, every_ = 1, due_ = -1;
  int np_ = 0;
  [[no_unique_address]] Fetch fetch_;
};

using BlockFetch = BasicBlockFetch<>;

// The block that for_each_panel_block visits after column block k0 of the np panels from g when it
// has several tiles: the next panels of the same column block, or the range's first ones of the next
// column block; np 0 after the last. Its tiles fetch it (BlockFetch): a thread's range is a few
// groups, so the jump to the next column block is a third of its blocks at two threads.
struct NextBlock {
  int64_t k0 = 0, g = 0;
  int np = 0;
  int64_t len = 0;  // columns
};
inline NextBlock next_panel_block(int64_t K, int64_t col_block, int64_t g0, int64_t g1, int64_t k0, int64_t g, int np) {
  NextBlock n{k0, g + np};
  if (n.g >= g1) n = {k0 + col_block, g0};
  if (n.k0 >= K) return {};
  n.np = static_cast<int>(std::min<int64_t>(kPanelTile512, g1 - n.g));
  n.len = std::min(col_block, K - n.k0);
  return n;
}

// Tile i of `tiles`'s fetch of `next` (its panels pstride elements of es bytes apart from base) over
// a loop of `steps` steps; nothing for an empty next.
inline BlockFetch next_block_fetch(const void* base, int64_t pstride, int64_t es, const NextBlock& next, int64_t i,
                                   int64_t tiles, int64_t steps) {
  if (next.np == 0) return {};
  const auto* at = static_cast<const char*>(base) + (next.g * pstride + next.k0 * kPanelRows) * es;
  return {at, pstride * es, next.np, next.len * kPanelRows * es, i, tiles, steps};
}

// Calls block(k0, g), which computes column block k0 of the panels from g for a token block's register
// tiles and returns how many panels it took, over columns [0, K) in blocks of col_block and panels
// [g0, g1). With several tiles, column blocks are outermost: each block of activations stays in L1
// while every group of panels reuses it. With one tile (a few tokens: a batched step, a speculative
// pass) each group's panels are read whole, a few long streams from memory as decode reads them;
// column blocks outermost would start a stream per block of every panel (kernels_bench
// BM_DecodeStream, f16 and bf16, Zen 4, one thread: 3 tokens 12.5 -> 24.5 GB/s, 4 tokens 11-12.5 -> 21;
// the BF16 dot kernel, 4 tokens of 8192 x 8192: 15.7 -> 27).
template <class Block>
inline void for_each_panel_block(int64_t K, int64_t col_block, int64_t g0, int64_t g1, int64_t tiles, Block&& block) {
  if (tiles == 1) {
    for (int64_t g = g0; g < g1;) {
      int64_t np = 0;
      for (int64_t k0 = 0; k0 < K; k0 += col_block) np = block(k0, g);
      g += np;
    }
  } else {
    for (int64_t k0 = 0; k0 < K; k0 += col_block)
      for (int64_t g = g0; g < g1;) g += block(k0, g);
  }
}

}  // namespace ember::kernels::detail
