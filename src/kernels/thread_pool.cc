#include "kernels/thread_pool.h"

#include <pthread.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ember::kernels {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
// About 20-50 microseconds of spinning: covers the gap between the loops of one decode step.
constexpr int kSpinIterations = 1000;
int threads_or_cores(int n) { return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) : claims_(threads_or_cores(n_threads)) {
  for (int i = 1; i < claims_.threads(); ++i)
    workers_.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), "ember-compute");  // so top -H and perf tell the threads apart
      worker_loop(i);
    });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

uint32_t ThreadPool::run_chunks(uint32_t gen, int index) {
  for (uint32_t ran = 0;; ++ran) {
    const int64_t c = claims_.claim(gen, index);
    if (c < 0) return ran;
    // Holding a chunk of loop gen, the loop's fields stay as parallel_for set them until it is done.
    const uint32_t count = n_chunks_;
    const int64_t b = c * chunk_;
    (*fn_)(b, std::min(n_, b + chunk_));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == count) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  if (workers_.empty() || max_chunks == 1 || caller_only_) {
    fn(0, n);
    return;
  }
  const Clock::time_point start = Clock::now();
  if (stalls_.solo(start)) {
    ++solo_loops_;
    fn(0, n);
    return;
  }
  // Several chunks per thread balance uneven work (and a thread that lost its core).
  const int64_t n_chunks = std::min<int64_t>({max_chunks, static_cast<int64_t>(size()) * 8, 0xFFFF});
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + n_chunks - 1) / n_chunks;
  n_chunks_ = static_cast<uint32_t>((n + chunk_ - 1) / chunk_);
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  claims_.start(gen, n_chunks_);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();  // a syscall only when some worker sleeps
  const uint32_t own = run_chunks(gen, 0);
  const Clock::time_point own_end = Clock::now();
  bool waited = false;
  for (int spins = 0;; ++spins) {
    const uint32_t d = done_.load(std::memory_order_acquire);
    if (d == n_chunks_) break;
    waited = true;
    if (spins < kSpinIterations) cpu_relax();
    else done_.wait(d, std::memory_order_acquire);
  }
  fn_ = nullptr;
  const Clock::time_point end = waited ? Clock::now() : own_end;
  stalls_.note(own_end - start, own, n_chunks_, end - start, end);
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; g == seen; ++spins) {
      if (spins < kSpinIterations) cpu_relax();
      else generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(g, index);
  }
}

}  // namespace ember::kernels
