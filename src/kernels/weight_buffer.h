#pragma once
// The memory of a model's repacked weights: zeroed, 64-byte aligned, and on Linux anonymous pages
// that the kernel may back with 2 MiB pages (madvise MADV_HUGEPAGE, which the default
// transparent-hugepage setting honours): a decode step streams every weight once, and 4 KiB pages
// cost a TLB miss every 4 KiB of it and a page fault each at load. Under AddressSanitizer it is
// plain heap memory, so that reads past a matrix's end are still caught.
#include <cstdint>
#include <memory>
#include <mutex>

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

// kWeightsOnHeap as the library was compiled (a test compiled without ASan can link an ASan library).
bool weight_buffers_on_heap();

// Bytes of a huge page (what mappings are aligned to).
inline constexpr int64_t kHugePageBytes = int64_t{2} << 20;

struct WeightMapping;  // an anonymous mapping (weight_buffer.cc)

class WeightBuffer {
 public:
  WeightBuffer() = default;
  // Memory of its own: a mapping that starts on a huge page (1 MiB or more), else heap memory.
  // Throws ember::Error naming `what` and the size when the memory cannot be had.
  explicit WeightBuffer(int64_t bytes, const char* what = "weights");
  ~WeightBuffer();
  WeightBuffer(WeightBuffer&& o) noexcept;
  WeightBuffer& operator=(WeightBuffer&& o) noexcept;
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;

  uint8_t* data() const { return data_; }

 private:
  friend class WeightArena;
  void release();
  uint8_t* data_ = nullptr;
  std::shared_ptr<WeightMapping> mapping_;  // the mapping data_ lies in (shared within an arena); null: heap
};

// Hands a model's weight buffers out of a few large mappings that start on huge pages. A buffer of its
// own gets 2 MiB pages only for the whole 2 MiB ranges inside it, so a 1B model's 0.6 MiB k/v
// projections, and the ends of its 2.4 MiB q/o ones, sat on 4 KiB pages and decoded from memory at
// 70-80% of the read probe where 2 MiB pages read them at 88-94% (Zen 4, one thread). A mapping
// lives while any buffer in it does; the unused end of one the arena leaves is unmapped.
class WeightArena {
 public:
  // Mappings of region_bytes (a multiple of kHugePageBytes); a buffer of a quarter of that or more
  // that does not fit the open one gets a mapping of its own.
  explicit WeightArena(int64_t region_bytes = int64_t{256} << 20);
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  // A zeroed, 64-byte aligned buffer (heap memory under AddressSanitizer, as WeightBuffer's).
  WeightBuffer take(int64_t bytes);

 private:
  void close_region();  // unmaps the open region's unused whole huge pages
  int64_t region_bytes_;
  std::mutex mu_;
  std::shared_ptr<WeightMapping> region_;  // the open region
  int64_t used_ = 0;                       // its bytes handed out
};

}  // namespace ember::kernels
