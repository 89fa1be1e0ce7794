// The next block's fetches of the AVX-512 panel kernels' tiles (kernels/panel_blocks.h): which lines,
// and when in a tile's loop.
#include "kernels/panel_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
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

// With several tiles, the block each one fetches is the one visited next: the next panels of its
// column block, then the range's first ones of the next column block; nothing after the last.
TEST(PanelBlocks, TheNextBlockIsTheOneVisitedNext) {
  for (int64_t K : {int64_t{128}, int64_t{300}, int64_t{2048}})
    for (const auto& range : {std::pair<int64_t, int64_t>{0, 1}, {0, 9}, {5, 13}, {3, 4}}) {
      const int64_t g0 = range.first, g1 = range.second;  // (clang 14 cannot capture structured bindings)
      SCOPED_TRACE(testing::Message() << K << " columns, panels " << g0 << ".." << g1);
      constexpr int64_t kCols = 128;
      std::vector<std::tuple<int64_t, int64_t, int>> visits;
      for_each_panel_block(K, kCols, g0, g1, 2, [&](int64_t k0, int64_t g) {
        const int np = static_cast<int>(std::min<int64_t>(kPanelTile512, g1 - g));
        visits.emplace_back(k0, g, np);
        return np;
      });
      ASSERT_EQ(visits.size(), static_cast<size_t>((K + kCols - 1) / kCols * ((g1 - g0 + 2) / 3)));
      for (size_t i = 0; i < visits.size(); ++i) {
        const auto [k0, g, np] = visits[i];
        const NextBlock next = next_panel_block(K, kCols, g0, g1, k0, g, np);
        if (i + 1 == visits.size()) {
          EXPECT_EQ(next.np, 0);
          continue;
        }
        const auto [nk0, ng, nnp] = visits[i + 1];
        EXPECT_EQ(next.k0, nk0);
        EXPECT_EQ(next.g, ng);
        EXPECT_EQ(next.np, nnp);
        EXPECT_EQ(next.len, std::min(kCols, K - nk0));
      }
    }
}

}  // namespace
}  // namespace ember::kernels::detail
