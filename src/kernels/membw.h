#pragma once
// The machine's memory read bandwidth as the kernels see it: a streaming read over a buffer much
// larger than the caches, split across the pool's threads.
#include <cstdint>

#include "kernels/thread_pool.h"

namespace ember::kernels {

// Median bytes/s over `passes` reads of a `bytes`-sized buffer (touched once before timing).
double read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int passes = 5);

}  // namespace ember::kernels
