#include "kernels/weight_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/error.h"

namespace ember::kernels {
namespace {

// Small buffers (heap) and large ones (mapped, huge pages advised) are zeroed, 64-byte aligned and
// writable to their last byte; a moved-from buffer owns nothing.
TEST(WeightBuffer, ZeroedAlignedAndMovable) {
  for (int64_t bytes : {int64_t{0}, int64_t{100}, int64_t{3} << 20}) {
    WeightBuffer b(bytes);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    for (int64_t i = 0; i < bytes; i += 4093) ASSERT_EQ(b.data()[i], 0) << bytes << " " << i;
    if (bytes > 0) b.data()[bytes - 1] = 7;
    uint8_t* at = b.data();
    WeightBuffer moved(std::move(b));
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(moved.data(), at);
    WeightBuffer assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.data(), at);
    if (bytes > 0) {
      EXPECT_EQ(assigned.data()[bytes - 1], 7);
    }
  }
}

// More memory than the machine can map (or, under AddressSanitizer, than its allocator serves: the
// asan and fuzz test presets let it return null as the plain allocator does): a clear error naming
// the size, not an abort.
TEST(WeightBuffer, TooLargeIsAClearError) {
  try {
    WeightBuffer b(int64_t{1} << 60);
    FAIL() << "2^60 bytes were allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
}

// A buffer of its own of 1 MiB or more starts on a huge page, so that every whole 2 MiB range of it
// can be a 2 MiB page.
TEST(WeightBuffer, MappedBufferStartsOnAHugePage) {
  if (weight_buffers_on_heap()) GTEST_SKIP() << "heap memory under AddressSanitizer";
  for (int64_t bytes : {int64_t{1} << 20, (int64_t{5} << 20) + 4097}) {
    WeightBuffer b(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePageBytes, 0u) << bytes;
    b.data()[bytes - 1] = 1;
  }
}

// An arena's buffers: zeroed, 64-byte aligned, disjoint, packed one after another into regions that
// start on huge pages (small ones included, the point of the arena), a large one in a mapping of its
// own; each stays valid after the arena and the other buffers are gone.
TEST(WeightArena, BuffersAreZeroedAlignedDisjointAndOutliveTheArena) {
  constexpr int64_t kRegion = int64_t{8} << 20;
  std::vector<int64_t> sizes = {100, 600 << 10, 15 << 19, 1, 0, 5 << 20, 2 << 20, 4093, 1 << 20};
  std::vector<WeightBuffer> bufs;
  {
    WeightArena arena(kRegion);
    for (int64_t n : sizes) bufs.push_back(arena.take(n));
  }
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (size_t i = 0; i < bufs.size(); ++i) {
    const int64_t n = std::max<int64_t>(sizes[i], 1);
    uint8_t* p = bufs[i].data();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << i;
    for (int64_t k = 0; k < n; k += 4093) ASSERT_EQ(p[k], 0) << i << " " << k;
    ASSERT_EQ(p[n - 1], 0) << i;
    std::fill(p, p + n, static_cast<uint8_t>(i + 1));
    spans.emplace_back(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(n));
  }
  auto sorted = spans;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_LE(sorted[i - 1].second, sorted[i].first) << "buffers overlap";
  if (!weight_buffers_on_heap()) {
    // The first buffer opens a region; the third (7.5 MiB: a quarter of the region or more, and it
    // does not fit what is left) has a mapping of its own; the ones after it share the region until
    // the last (1 MiB) does not fit and opens a new one.
    EXPECT_EQ(spans[0].first % kHugePageBytes, 0u);
    EXPECT_EQ(spans[1].first, spans[0].first + 128);
    EXPECT_EQ(spans[2].first % kHugePageBytes, 0u);
    EXPECT_EQ(spans[3].first, spans[1].first + (600 << 10));
    EXPECT_EQ(spans[6].first, spans[5].first + (5 << 20));
    EXPECT_EQ(spans[8].first % kHugePageBytes, 0u);
    EXPECT_NE(spans[8].first, spans[7].first + 4096);
  }
  // Buffers released in any order leave the others intact.
  for (size_t i = 0; i < bufs.size(); i += 2) bufs[i] = WeightBuffer();
  for (size_t i = 1; i < bufs.size(); i += 2) {
    const int64_t n = std::max<int64_t>(sizes[i], 1);
    EXPECT_EQ(bufs[i].data()[0], i + 1);
    EXPECT_EQ(bufs[i].data()[n - 1], i + 1);
  }
}

// The arena's regions hold consecutive buffers until one does not fit: the next region starts on a
// huge page again.
TEST(WeightArena, OpensANewRegionWhenABufferDoesNotFit) {
  if (weight_buffers_on_heap()) GTEST_SKIP() << "heap memory under AddressSanitizer";
  constexpr int64_t kRegion = int64_t{4} << 20, kPiece = int64_t{3} << 18;  // 0.75 MiB: under a quarter
  WeightArena arena(kRegion);
  std::vector<WeightBuffer> b;
  for (int i = 0; i < 6; ++i) b.push_back(arena.take(kPiece));  // 4.5 MiB: the sixth opens a region
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b[0].data()) % kHugePageBytes, 0u);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(b[i].data(), b[i - 1].data() + kPiece) << i;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b[5].data()) % kHugePageBytes, 0u);
  EXPECT_TRUE(b[5].data() < b[0].data() || b[5].data() >= b[4].data() + kPiece);
  b[5].data()[kPiece - 1] = 3;
  b[4].data()[kPiece - 1] = 2;
  EXPECT_EQ(b[5].data()[kPiece - 1], 3);
}

}  // namespace
}  // namespace ember::kernels
