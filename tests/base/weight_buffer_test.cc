#include "base/weight_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace ember {

namespace {
// Both kinds of buffer: from the heap (small) and mapped (large), each zero-filled and aligned.
void expect_zeroed_and_aligned(const WeightBuffer& b, size_t bytes) {
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(b.data()[i], 0) << "byte " << i;
  EXPECT_EQ(b.data()[bytes - 1], 0);
}
}  // namespace

TEST(WeightBuffer, SmallAndLargeAreZeroedAndAligned) {
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{5} << 20, (size_t{9} << 20) + 3}) {
    WeightBuffer b(bytes);
    expect_zeroed_and_aligned(b, bytes);
    b.data()[bytes - 1] = 7;  // writable to its last byte
    EXPECT_EQ(b.data()[bytes - 1], 7);
  }
}

TEST(WeightBuffer, MovesOwnership) {
  for (size_t bytes : {size_t{100}, size_t{6} << 20}) {
    WeightBuffer a(bytes);
    a.data()[0] = 42;
    uint8_t* p = a.data();
    WeightBuffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.data(), p);
    WeightBuffer c(16);
    c = std::move(b);  // c's own buffer is freed, b's taken
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(c.data()[0], 42);
    EXPECT_EQ(b.data(), nullptr);
  }
  WeightBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

// The VmFlags of the mapping that holds p (/proc/self/smaps), or "" when none is found.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(WeightBuffer, LargeBuffersAskForHugePages) {
  WeightBuffer b(size_t{8} << 20);
  const std::string flags = vm_flags_of(b.data());
  if (flags.empty()) GTEST_SKIP() << "no /proc/self/smaps here";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;  // hg: MADV_HUGEPAGE
}

}  // namespace ember
