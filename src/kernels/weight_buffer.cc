#include "kernels/weight_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "base/error.h"

namespace ember::kernels {

// An anonymous mapping starting on a huge page; unmapped with its last owner.
struct WeightMapping {
  uint8_t* base = nullptr;
  int64_t bytes = 0;
  WeightMapping(uint8_t* b, int64_t n) : base(b), bytes(n) {}
  ~WeightMapping() { ::munmap(base, static_cast<size_t>(bytes)); }
  WeightMapping(const WeightMapping&) = delete;
  WeightMapping& operator=(const WeightMapping&) = delete;
};

namespace {
// Below this a mapping of its own would waste most of a huge page; small matrices (norms, tiny
// models) outside an arena take heap memory.
constexpr int64_t kMapFrom = int64_t{1} << 20;
constexpr std::align_val_t kAlign{64};
constexpr int64_t kSmallPage = 4096;

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void out_of_memory(const char* what, int64_t bytes, const char* why) {
  fail(what, "cannot allocate " + std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB: " + why);
}

// n bytes (rounded up to small pages) of zeroed memory starting on a huge page: a mapping one huge
// page longer, trimmed at both ends. 2 MiB pages back the whole huge pages inside it.
std::shared_ptr<WeightMapping> map_aligned(int64_t n, const char* what) {
  const int64_t bytes = round_up(n, kSmallPage), over = bytes + kHugePageBytes;
  void* p = ::mmap(nullptr, static_cast<size_t>(over), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) out_of_memory(what, n, std::strerror(errno));
  auto* raw = static_cast<uint8_t*>(p);
  auto* base = reinterpret_cast<uint8_t*>(round_up(static_cast<int64_t>(reinterpret_cast<uintptr_t>(raw)), kHugePageBytes));
  if (base > raw) ::munmap(raw, static_cast<size_t>(base - raw));
  if (raw + over > base + bytes) ::munmap(base + bytes, static_cast<size_t>(raw + over - (base + bytes)));
  ::madvise(base, static_cast<size_t>(bytes), MADV_HUGEPAGE);  // advice: without it the pages are small
  return std::make_shared<WeightMapping>(base, bytes);
}

uint8_t* heap_zeroed(int64_t n, const char* what) {
  void* p = ::operator new(static_cast<size_t>(n), kAlign, std::nothrow);
  if (!p) out_of_memory(what, n, "out of memory");
  std::memset(p, 0, static_cast<size_t>(n));
  return static_cast<uint8_t*>(p);
}
}  // namespace

bool weight_buffers_on_heap() { return kWeightsOnHeap; }

WeightBuffer::WeightBuffer(int64_t bytes, const char* what) {
  const int64_t n = bytes > 0 ? bytes : 64;
  if (!kWeightsOnHeap && n >= kMapFrom) {
    mapping_ = map_aligned(n, what);
    data_ = mapping_->base;
    return;
  }
  data_ = heap_zeroed(n, what);
}

WeightBuffer::~WeightBuffer() { release(); }

WeightBuffer::WeightBuffer(WeightBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), mapping_(std::move(o.mapping_)) {}

WeightBuffer& WeightBuffer::operator=(WeightBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    mapping_ = std::move(o.mapping_);
  }
  return *this;
}

void WeightBuffer::release() {
  if (data_ != nullptr && !mapping_) ::operator delete(data_, kAlign);
  data_ = nullptr;
  mapping_.reset();
}

WeightArena::WeightArena(int64_t region_bytes) : region_bytes_(round_up(region_bytes, kHugePageBytes)) {}

WeightArena::~WeightArena() { close_region(); }

void WeightArena::close_region() {
  if (!region_) return;
  // Whole huge pages past the last buffer: unmapped (never touched, so never resident either; this
  // returns the address space). Buffers keep the rest mapped.
  const int64_t keep = round_up(used_, kHugePageBytes);
  if (keep < region_->bytes && region_.use_count() > 1) {
    ::munmap(region_->base + keep, static_cast<size_t>(region_->bytes - keep));
    region_->bytes = keep;
  }
  region_.reset();
  used_ = 0;
}

WeightBuffer WeightArena::take(int64_t bytes) {
  const int64_t n = round_up(bytes > 0 ? bytes : 64, 64);
  if (kWeightsOnHeap) return WeightBuffer(n);
  std::lock_guard lock(mu_);
  if (!region_ || used_ + n > region_->bytes) {
    if (n >= region_bytes_ / 4) return WeightBuffer(n);
    close_region();
    region_ = map_aligned(region_bytes_, "weights");
  }
  WeightBuffer b;
  b.data_ = region_->base + used_;
  b.mapping_ = region_;
  used_ += n;
  return b;
}

}  // namespace ember::kernels
