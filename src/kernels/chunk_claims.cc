#include "kernels/chunk_claims.h"

namespace ember::kernels {

namespace {
constexpr uint32_t gen_of(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
constexpr uint32_t front_of(uint64_t v) { return static_cast<uint32_t>((v >> 16) & 0xFFFF); }
constexpr uint32_t back_of(uint64_t v) { return static_cast<uint32_t>(v & 0xFFFF); }
}  // namespace

ChunkClaims::ChunkClaims(int threads) : threads_(threads > 0 ? threads : 1), segments_(new Segment[static_cast<size_t>(threads_)]) {}

void ChunkClaims::start(uint32_t gen, uint32_t n_chunks) {
  for (int t = 0; t < threads_; ++t) {
    const auto front = static_cast<uint64_t>(segment_begin(t, n_chunks)), back = static_cast<uint64_t>(segment_begin(t + 1, n_chunks));
    segments_[t].word.store((uint64_t{gen} << 32) | (front << 16) | back, std::memory_order_release);
  }
}

int64_t ChunkClaims::claim(uint32_t gen, int t) {
  // Its own segment from the front.
  std::atomic<uint64_t>& own = segments_[t].word;
  for (uint64_t v = own.load(std::memory_order_acquire);;) {
    if (gen_of(v) != gen) return -1;
    if (front_of(v) >= back_of(v)) break;
    if (own.compare_exchange_weak(v, v + (uint64_t{1} << 16), std::memory_order_acq_rel)) return front_of(v);
  }
  // Then the others' from the back, the next thread's first.
  for (int i = 1; i < threads_; ++i) {
    std::atomic<uint64_t>& other = segments_[(t + i) % threads_].word;
    for (uint64_t v = other.load(std::memory_order_acquire);;) {
      if (gen_of(v) != gen) return -1;
      if (front_of(v) >= back_of(v)) break;
      if (other.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return back_of(v) - 1;
    }
  }
  return -1;
}

}  // namespace ember::kernels
