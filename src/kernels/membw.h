#pragma once
// The machine's memory read bandwidth as the kernels can see it, the roofline of decode: each of the
// pool's threads streams its own share of a buffer much larger than the caches, in several streams
// side by side, from memory of the weights' kind (kernels/weight_buffer.h: the same page size).
#include <cstdint>

#include "kernels/thread_pool.h"

namespace ember::kernels {

// The best bytes/s of `passes` reads of a buffer of about `bytes` (touched once before timing): an
// upper bound is what a roofline is.
double read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int passes = 10);

}  // namespace ember::kernels
