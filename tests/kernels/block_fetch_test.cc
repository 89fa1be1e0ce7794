// The next block's fetches of the AVX-512 panel kernels' tiles (kernels/block_fetch.h): which lines,
// and when in a tile's loop.
#include "kernels/block_fetch.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace ember::kernels::detail {
namespace {

struct Record {
  std::vector<const char*>* lines;
  void operator()(const char* line) const { lines->push_back(line); }
};

// Over a block's tiles every line of every panel is fetched exactly once, at most one line of each
// panel per step of a tile's loop, evenly spaced over the loop, and only a loop shorter than its share
// leaves lines to finish().
TEST(BlockFetch, TheTilesFetchEveryLineOfTheBlockOnceSpreadOverTheirSteps) {
  for (int np : {0, 1, 2, 3})
    for (int64_t bytes : {int64_t{64}, int64_t{5 * 64}, int64_t{8192}, int64_t{24576}})
      for (int64_t tiles : {1, 2, 3, 8, 9})
        for (int64_t steps : {1, 4, 128, 256}) {
          SCOPED_TRACE(testing::Message() << np << " panels of " << bytes << " bytes, " << tiles << " tiles of "
                                          << steps << " steps");
          const int64_t stride = bytes + 4096;
          std::vector<char> memory(static_cast<size_t>(std::max(np, 1) * stride));
          std::vector<const char*> got;
          for (int64_t i = 0; i < tiles; ++i) {
            BasicBlockFetch<Record> fetch(memory.data(), stride, np, bytes, i, tiles, steps, Record{&got});
            const int64_t share = (i + 1) * (bytes / 64) / tiles - i * (bytes / 64) / tiles;
            int64_t last_step = -1;
            for (int64_t k = 0; k < steps; ++k) {
              const size_t before = got.size();
              fetch.at_step(k);
              ASSERT_LE(got.size() - before, static_cast<size_t>(np)) << "step " << k;
              if (got.size() > before) last_step = k;
            }
            // Spread: the share's last line comes as late as an even spacing puts it, not in a burst.
            if (np > 0 && share > 1 && share <= steps) {
              EXPECT_GE(last_step, (share - 1) * (steps / share));
            }
            const size_t before = got.size();
            fetch.finish();
            EXPECT_EQ(got.size() - before, static_cast<size_t>(np * std::max<int64_t>(0, share - steps)));
          }
          std::map<const char*, int> times;
          for (const char* line : got) ++times[line];
          ASSERT_EQ(times.size(), static_cast<size_t>(np * (bytes / 64)));
          for (int p = 0; p < np; ++p)
            for (int64_t l = 0; l < bytes / 64; ++l) EXPECT_EQ(times[memory.data() + p * stride + l * 64], 1);
        }
}

// A default fetch (a tile with no next block) fetches nothing.
TEST(BlockFetch, NoNextBlockFetchesNothing) {
  std::vector<const char*> got;
  BasicBlockFetch<Record> none(nullptr, 0, 0, 8192, 0, 1, 128, Record{&got});
  for (int64_t k = 0; k < 128; ++k) none.at_step(k);
  none.finish();
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace ember::kernels::detail
