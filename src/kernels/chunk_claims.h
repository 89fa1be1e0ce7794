#pragma once
// The chunks of one parallel loop, split into one contiguous segment per thread. A thread claims its
// own segment's chunks from the front, in order, so that it streams its rows as one sequence (the
// hardware prefetcher follows it from chunk to chunk, and 16 threads each read their own rows); once
// its segment is empty it takes the last unclaimed chunk of another segment, the farthest from where
// that segment's owner works. Lock-free: one word per segment on its own cache line (no counter that
// every claim of every thread contends for), tagged with the loop's generation so that a late claim
// of a finished loop fails.
#include <atomic>
#include <cstdint>
#include <memory>

namespace ember::kernels {

class ChunkClaims {
 public:
  explicit ChunkClaims(int threads);
  int threads() const { return threads_; }

  // Starts loop `gen` of n_chunks (< 65536) chunks; called before the threads learn of the loop.
  void start(uint32_t gen, uint32_t n_chunks);
  // A chunk of loop `gen` for thread t (0 <= t < threads), or -1: none left, or `gen` is over.
  int64_t claim(uint32_t gen, int t);
  // The first chunk of thread t's segment in a loop of n_chunks (its end: segment_begin(t + 1, ...)).
  int64_t segment_begin(int t, uint32_t n_chunks) const { return int64_t{t} * n_chunks / threads_; }

 private:
  // (gen << 32) | (front << 16) | back: the unclaimed chunks are [front, back).
  struct alignas(64) Segment {
    std::atomic<uint64_t> word{0};
  };
  int threads_;
  std::unique_ptr<Segment[]> segments_;
};

}  // namespace ember::kernels
