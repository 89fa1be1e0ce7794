#include "kernels/weight_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

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

}  // namespace
}  // namespace ember::kernels
