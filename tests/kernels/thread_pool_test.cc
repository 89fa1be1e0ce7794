#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// The solo rule with made-up times (no threads, no clock): a worker delayed near the end of every
// loop makes each loop take about 7.8 ms where the caller alone would take 9.6 (it waits about 2 ms
// for the worker's chunk but shares the rest), so loops keep running on both threads. Judging each
// wait alone sent them to the caller.
TEST(StallWindow, BriefDelaysKeepBothThreads) {
  using namespace std::chrono_literals;
  using D = StallWindow::Clock::duration;
  StallWindow w;
  StallWindow::Clock::time_point now{};
  for (int loop = 0; loop < 40; ++loop) {
    now += 7800us;
    // 64 chunks: the caller ran 39 of them in 5.85 ms (alone it would take 9.6 ms), then waited.
    EXPECT_FALSE(w.note(D(5850us), 39, 64, D(7800us), now));
    EXPECT_FALSE(w.solo(now));
  }
}

// Loops slower on all threads than the caller alone: the window of 20 ms that shows it starts a
// solo period, which doubles while slow windows recur soon after, up to the bound, and starts short
// again once they stop.
TEST(StallWindow, SlowWindowsStartSoloPeriodsThatBackOff) {
  using namespace std::chrono_literals;
  using D = StallWindow::Clock::duration;
  StallWindow w;
  StallWindow::Clock::time_point now{};
  // A slow loop (the caller ran half the chunks in 1 ms, the loop took 10 ms: alone, 2 ms).
  auto slow = [&] {
    now += 10ms;
    return w.note(D(1ms), 32, 64, D(10ms), now);
  };
  EXPECT_FALSE(slow());  // 10 ms: the window is not full yet
  EXPECT_TRUE(slow());
  EXPECT_TRUE(w.solo(now));
  EXPECT_TRUE(w.solo(now + StallWindow::kMinBackoff - 1us));
  EXPECT_FALSE(w.solo(now + StallWindow::kMinBackoff));
  D period = StallWindow::kMinBackoff;
  for (int i = 0; i < 10; ++i) {  // each solo period ends, the next window is slow again
    now += period;
    EXPECT_FALSE(slow());
    EXPECT_TRUE(slow());
    period = std::min(2 * period, StallWindow::kMaxBackoff);
    EXPECT_TRUE(w.solo(now + period - 1us)) << i;
    EXPECT_FALSE(w.solo(now + period)) << i;
  }
  now += 60s;  // the neighbour left long ago
  EXPECT_FALSE(slow());
  EXPECT_TRUE(slow());
  EXPECT_FALSE(w.solo(now + StallWindow::kMinBackoff));
}

}  // namespace
}  // namespace ember::kernels
