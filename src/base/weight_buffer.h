#pragma once
// Zero-filled memory for a model's repacked weights. Decode streams every weight byte once per token,
// so the buffer asks the kernel for transparent huge pages (MADV_HUGEPAGE; Debian's default is
// "madvise"): 2 MiB pages cut the TLB misses of that stream 512-fold. Anonymous mmap, not the heap,
// so the pages are the buffer's own and return to the system when it goes. Small buffers (a MoE model
// has tens of thousands of expert matrices) come from the heap, under the limit on mappings.
#include <cstddef>
#include <cstdint>

namespace ember {

class WeightBuffer {
 public:
  WeightBuffer() = default;
  explicit WeightBuffer(size_t bytes);  // throws ember::Error when the memory cannot be had
  ~WeightBuffer();
  WeightBuffer(WeightBuffer&& o) noexcept;
  WeightBuffer& operator=(WeightBuffer&& o) noexcept;
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;

  uint8_t* data() const { return data_; }  // 64-byte aligned
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace ember
