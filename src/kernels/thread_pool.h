#pragma once
// A fixed set of worker threads that run data-parallel loops. The calling thread takes part, so a
// pool of size 1 runs everything inline. Workers spin briefly, then sleep, between loops: decode
// steps issue many short loops and thread wake-up latency would dominate them.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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

 private:
  void worker_loop(int index);
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<bool> stop_{false};
  // The current loop (valid while pending_ > 0).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, n_chunks_ = 0;
};

}  // namespace ember::kernels
