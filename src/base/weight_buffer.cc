#include "base/weight_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "base/error.h"

namespace ember {

namespace {
constexpr size_t kMapFrom = size_t{4} << 20;  // two huge pages: smaller buffers gain little from them
constexpr std::align_val_t kAlign{64};
}  // namespace

WeightBuffer::WeightBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes < kMapFrom) {
    data_ = static_cast<uint8_t*>(::operator new(bytes, kAlign, std::nothrow));
    if (data_ == nullptr) fail("weights", "cannot allocate " + std::to_string(bytes) + " bytes for a weight matrix");
    std::memset(data_, 0, bytes);
    return;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail("weights", "cannot allocate " + std::to_string(bytes >> 20) + " MiB for a weight matrix: " + std::strerror(errno));
  // Advice only: without huge pages (THP off, or a kernel without it) the buffer still works.
  ::madvise(p, bytes, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(p);
  mapped_ = true;
}

WeightBuffer::WeightBuffer(WeightBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, false)) {}

WeightBuffer::~WeightBuffer() {
  if (data_ == nullptr) return;
  if (mapped_) ::munmap(data_, size_);
  else ::operator delete(data_, kAlign);
}

WeightBuffer& WeightBuffer::operator=(WeightBuffer&& o) noexcept {
  if (this != &o) {
    WeightBuffer old(std::move(*this));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

}  // namespace ember
