#pragma once
// The memory of a model's repacked weights: zeroed, 64-byte aligned, and on Linux anonymous pages
// that the kernel may back with 2 MiB pages (madvise MADV_HUGEPAGE, which the default
// transparent-hugepage setting honours): a decode step streams every weight once, and 4 KiB pages
// cost a TLB miss every 4 KiB of it and a page fault each at load. Under AddressSanitizer it is
// plain heap memory, so that reads past a matrix's end are still caught.
#include <cstdint>

namespace ember::kernels {

// Whether every buffer is heap memory (AddressSanitizer builds).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kWeightsOnHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kWeightsOnHeap = true;
#else
inline constexpr bool kWeightsOnHeap = false;
#endif
#else
inline constexpr bool kWeightsOnHeap = false;
#endif

class WeightBuffer {
 public:
  WeightBuffer() = default;
  // Throws ember::Error naming the size when the memory cannot be had.
  explicit WeightBuffer(int64_t bytes);
  ~WeightBuffer();
  WeightBuffer(WeightBuffer&& o) noexcept;
  WeightBuffer& operator=(WeightBuffer&& o) noexcept;
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;

  uint8_t* data() const { return data_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  int64_t mapped_ = 0;  // bytes mapped (0: heap memory or none)
};

}  // namespace ember::kernels
