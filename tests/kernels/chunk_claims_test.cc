#include "kernels/chunk_claims.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/thread_pool.h"

namespace ember::kernels {
namespace {

// One thread alone: its own segment front to back, then each other segment (the next thread's
// first) from its back, then nothing.
TEST(ChunkClaims, OwnSegmentInOrderThenTheOthersFromTheirBacks) {
  for (int threads : {1, 2, 3, 5})
    for (uint32_t n : {1u, 3u, 10u, 17u})
      for (int t = 0; t < threads; ++t) {
        ChunkClaims c(threads);
        c.start(7, n);
        std::vector<int64_t> want;
        for (int64_t i = c.segment_begin(t, n); i < c.segment_begin(t + 1, n); ++i) want.push_back(i);
        for (int k = 1; k < threads; ++k) {
          const int o = (t + k) % threads;
          for (int64_t i = c.segment_begin(o + 1, n) - 1; i >= c.segment_begin(o, n); --i) want.push_back(i);
        }
        std::vector<int64_t> got;
        for (int64_t x; (x = c.claim(7, t)) >= 0;) got.push_back(x);
        EXPECT_EQ(got, want) << threads << " threads, " << n << " chunks, thread " << t;
      }
}

// The segments are contiguous, in thread order, and cover the loop; a thread's share differs from
// another's by at most one chunk.
TEST(ChunkClaims, SegmentsSplitTheLoopEvenly) {
  for (int threads : {1, 2, 3, 16})
    for (uint32_t n : {1u, 2u, 15u, 16u, 128u, 65535u}) {
      ChunkClaims c(threads);
      EXPECT_EQ(c.segment_begin(0, n), 0);
      EXPECT_EQ(c.segment_begin(threads, n), n);
      for (int t = 0; t < threads; ++t) {
        const int64_t size = c.segment_begin(t + 1, n) - c.segment_begin(t, n);
        EXPECT_GE(size, n / threads);
        EXPECT_LE(size, n / threads + 1);
      }
    }
}

// A claim for a loop that is over (a worker waking late) gets nothing, whatever is left of the new one.
TEST(ChunkClaims, ALateClaimOfAFinishedLoopGetsNothing) {
  ChunkClaims c(2);
  c.start(1, 8);
  EXPECT_EQ(c.claim(1, 0), 0);
  c.start(2, 8);
  EXPECT_EQ(c.claim(1, 0), -1);
  EXPECT_EQ(c.claim(1, 1), -1);
  EXPECT_EQ(c.claim(2, 1), 4);
}

// Threads claiming at once, loop after loop: every chunk of every loop goes to exactly one of them.
TEST(ChunkClaims, EveryChunkOnceUnderContention) {
  constexpr int kThreads = 4, kLoops = 300;
  constexpr uint32_t kChunks = 37;
  ChunkClaims c(kThreads);
  std::vector<std::atomic<int>> hits(kChunks);
  std::vector<std::vector<int>> counts(kLoops, std::vector<int>(kChunks));
  std::barrier sync(kThreads, [&]() noexcept {});
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int l = 0; l < kLoops; ++l) {
        if (t == 0) {
          for (auto& h : hits) h.store(0);
          c.start(static_cast<uint32_t>(l + 1), kChunks);
        }
        sync.arrive_and_wait();
        for (int64_t x; (x = c.claim(static_cast<uint32_t>(l + 1), t)) >= 0;) hits[static_cast<size_t>(x)].fetch_add(1);
        sync.arrive_and_wait();
        if (t == 0)
          for (uint32_t i = 0; i < kChunks; ++i) counts[static_cast<size_t>(l)][i] = hits[i].load();
        sync.arrive_and_wait();
      }
    });
  for (auto& t : ts) t.join();
  for (int l = 0; l < kLoops; ++l)
    for (uint32_t i = 0; i < kChunks; ++i) ASSERT_EQ(counts[static_cast<size_t>(l)][i], 1) << "loop " << l << " chunk " << i;
}

// Through the pool: what the caller runs of its own share (the loop's first half at two threads) is
// a prefix of it in order, whatever the worker took from its back.
TEST(ThreadPool, TheCallerRunsItsOwnShareFromItsStartInOrder) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  constexpr int64_t kN = 16;  // chunks of one index (the pool cuts at most 8 per thread)
  for (int rep = 0; rep < 200; ++rep) {
    std::mutex m;
    std::vector<int64_t> mine;
    pool.parallel_for(kN, 1, [&](int64_t b, int64_t e) {
      volatile double x = 0;
      for (int i = 0; i < 2000; ++i) x = x + 1;  // long enough for the worker to take part
      std::lock_guard lock(m);
      if (std::this_thread::get_id() == caller)
        for (int64_t i = b; i < e; ++i) mine.push_back(i);
    });
    std::vector<int64_t> own;
    for (int64_t i : mine)
      if (i < kN / 2) own.push_back(i);
    for (size_t k = 0; k < own.size(); ++k) ASSERT_EQ(own[k], static_cast<int64_t>(k)) << "rep " << rep;
  }
}

}  // namespace
}  // namespace ember::kernels
