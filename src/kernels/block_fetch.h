#pragma once
// Internal: how a prefill tile of a panel kernel fetches the next group of panels' column block into
// L2 while it computes (matmul_panel_avx512.cc, matmul_panel_bf16_avx512.cc). The next group's panels
// start pages of their own, where the hardware prefetcher does not follow.
#include <algorithm>
#include <cstdint>

#include "kernels/matmul_impl.h"

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

}  // namespace ember::kernels::detail
