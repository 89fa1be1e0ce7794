#include "kernels/weight_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "base/error.h"

namespace ember::kernels {

namespace {
// Below this a mapping would waste most of a huge page; small matrices (norms, tiny models) take
// heap memory.
constexpr int64_t kMapFrom = int64_t{1} << 20;
constexpr std::align_val_t kAlign{64};

[[noreturn]] void out_of_memory(int64_t bytes, const char* why) {
  fail("weights", "cannot allocate " + std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB: " + why);
}
}  // namespace

WeightBuffer::WeightBuffer(int64_t bytes) {
  const int64_t n = bytes > 0 ? bytes : 64;
  if (!kWeightsOnHeap && n >= kMapFrom) {
    void* p = ::mmap(nullptr, static_cast<size_t>(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(n, std::strerror(errno));
    ::madvise(p, static_cast<size_t>(n), MADV_HUGEPAGE);  // advice: without it the pages are small
    data_ = static_cast<uint8_t*>(p);
    mapped_ = n;
    return;
  }
  void* p = ::operator new(static_cast<size_t>(n), kAlign, std::nothrow);
  if (!p) out_of_memory(n, "out of memory");
  std::memset(p, 0, static_cast<size_t>(n));
  data_ = static_cast<uint8_t*>(p);
}

WeightBuffer::~WeightBuffer() { release(); }

WeightBuffer::WeightBuffer(WeightBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), mapped_(std::exchange(o.mapped_, 0)) {}

WeightBuffer& WeightBuffer::operator=(WeightBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

void WeightBuffer::release() {
  if (!data_) return;
  if (mapped_ > 0) ::munmap(data_, static_cast<size_t>(mapped_));
  else ::operator delete(data_, kAlign);
  data_ = nullptr;
  mapped_ = 0;
}

}  // namespace ember::kernels
