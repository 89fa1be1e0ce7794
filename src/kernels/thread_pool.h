#pragma once
// A fixed set of worker threads that run data-parallel loops. The calling thread takes part, so a
// pool of size 1 runs everything inline. Each thread claims the chunks of its own contiguous share
// of the loop in order, then those others have not reached (kernels/chunk_claims.h), and the caller
// waits for chunks, not for threads: a worker that has no core (another process keeps it busy) simply
// claims nothing and the others finish its share. Waiting threads spin briefly (decode issues many
// short loops), then sleep on a futex (std::atomic::wait) so they never steal a busy core for long.
//
// A worker that is descheduled while it holds a chunk (another process shares its core) still makes
// the caller wait for that chunk, up to a scheduler time slice. The pool compares, over windows of
// loops, the time they took with what the caller alone would have taken; when all threads were
// slower it runs loops on the caller alone for a while (kernels/stall_window.h), so sharing a core
// with a busy neighbour never makes more threads slower than one, and brief delays do not cost the
// second thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/chunk_claims.h"
#include "kernels/stall_window.h"

namespace ember::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n). Chunks are at least `grain` long.
  // Returns when all chunks are done. Not reentrant: fn must not call parallel_for on this pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Loops run by the caller alone because of an earlier stall (for tests and diagnostics).
  int64_t solo_loops() const { return solo_loops_; }

  // While set, loops run on the calling thread alone (a WidthTuner found the others do not help).
  void set_caller_only(bool on) { caller_only_ = on; }
  bool caller_only() const { return caller_only_; }

 private:
  using Clock = std::chrono::steady_clock;
  void worker_loop(int index);
  // Claims and runs chunks of loop `gen` as thread `index` (the caller: 0) until none is left;
  // returns how many it ran.
  uint32_t run_chunks(uint32_t gen, int index);

  std::vector<std::thread> workers_;
  ChunkClaims claims_;
  // Each shared word on its own cache line: completions would otherwise take the line from the
  // threads spinning on generation_ (and from each other) at every chunk.
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped per loop; workers sleep on it
  std::atomic<bool> stop_{false};                     // read with generation_
  alignas(64) std::atomic<uint32_t> done_{0};        // chunks finished in the current loop; the caller sleeps on it
  // The current loop; written before generation_ is bumped, read only by holders of a claimed chunk.
  alignas(64) const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  uint32_t n_chunks_ = 0;
  StallWindow stalls_;  // touched by the calling thread only
  int64_t solo_loops_ = 0;
  bool caller_only_ = false;
};

}  // namespace ember::kernels
