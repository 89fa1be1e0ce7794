#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ember::kernels {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 50; ++rep)
        pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
      for (auto& h : hits) ASSERT_EQ(h.load(), 50);
    }
  }
}

// A worker that stops in the middle of a chunk (as when another process takes its core) makes the
// caller wait; the pool then runs the next loops on the caller alone, and every index is still
// covered exactly once. Counts are relative and the stall long (50 ms) so that a loaded machine or a
// sanitizer build, which may stall the worker on its own, cannot change the outcome.
TEST(ThreadPool, StallOfAWorkerSwitchesToCallerAlone) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> stalled{false};
  std::vector<std::atomic<int>> hits(64);
  for (int rep = 0; rep < 2000 && !stalled.load(); ++rep)
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      // Chunks long enough that the worker, once awake, gets some of them.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (std::this_thread::get_id() != caller && !stalled.exchange(true))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  ASSERT_TRUE(stalled.load()) << "the worker never took a chunk";
  const int first = hits[0].load();
  for (auto& h : hits) ASSERT_EQ(h.load(), first);
  const int64_t solo_before = pool.solo_loops();
  pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  EXPECT_EQ(pool.solo_loops(), solo_before + 1);
  for (auto& h : hits) ASSERT_EQ(h.load(), first + 1);
}

// A worker delayed near the end of every loop (4 ms in its first chunk from index 48 on: a
// neighbour's tick, a server's connection thread) makes the caller wait for it, about 2 ms, yet the
// loop still takes less than the caller alone would (about 7.8 ms against 9.6), so loops keep
// running on both threads. Judging each wait alone (over 1 ms and 4 chunks) sent the loops to the
// caller. A bound rather than zero: a loaded machine may stall the worker for real.
TEST(ThreadPool, BriefDelaysKeepBothThreads) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  const int loops = 40;
  for (int rep = 0; rep < loops; ++rep) {
    std::atomic<bool> delayed{false};
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      if (b >= 48 && std::this_thread::get_id() != caller && !delayed.exchange(true))
        std::this_thread::sleep_for(std::chrono::milliseconds(4));
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(150) * (e - b);
      while (std::chrono::steady_clock::now() < until) {
      }
    });
  }
  EXPECT_LE(pool.solo_loops(), loops / 4);
}

}  // namespace
}  // namespace ember::kernels
