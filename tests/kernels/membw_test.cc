#include "kernels/membw.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ember::kernels {
namespace {

// The probe reads every thread's share inside its buffer (the sanitizer builds check the bounds: their
// weight memory is heap memory) and gives a finite rate, for buffer sizes that do and do not divide
// evenly into threads, streams and steps.
TEST(ReadBandwidth, EveryThreadStreamsItsShare) {
  for (int threads : {1, 2, 3})
    for (int64_t bytes : {int64_t{1} << 20, (int64_t{3} << 20) + 4097}) {
      ThreadPool pool(threads);
      const double bw = read_bandwidth(pool, bytes, 2);
      EXPECT_TRUE(std::isfinite(bw)) << threads << " threads, " << bytes << " bytes";
      EXPECT_GT(bw, 1e6) << threads << " threads, " << bytes << " bytes";
    }
}

}  // namespace
}  // namespace ember::kernels
