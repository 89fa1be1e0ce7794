#include "kernels/membw.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/clock.h"
#include "kernels/weight_buffer.h"

namespace ember::kernels {

namespace {

// Streams each thread reads side by side. One core keeps too few lines in flight with one
// sequential stream (about 13 GB/s on Zen 3 at one thread, where 8 streams read 28 GB/s).
constexpr int64_t kStreams = 8;
// Bytes each stream reads per step: two cache lines, four 32-byte loads.
constexpr int64_t kStep = 128;
// Pieces lie this many bytes (41 lines) more than their size apart: at a power-of-two distance the
// streams contend for the same DRAM banks (one thread on Zen 3: 18 GB/s at 0, 23 at 3 lines, 27
// at 17 to 41 lines).
constexpr int64_t kStagger = 41 * 64;

// XOR of every 32-byte word of the kStreams pieces of `len` bytes (kStagger apart) from p, read in
// lockstep.
__m256i read_streams(const uint8_t* p, int64_t len) {
  __m256i acc[kStreams];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (int64_t at = 0; at < len; at += kStep) {
    #pragma GCC unroll 8
    for (int64_t s = 0; s < kStreams; ++s) {
      const auto* v = reinterpret_cast<const __m256i*>(p + s * (len + kStagger) + at);
      const __m256i a = _mm256_xor_si256(_mm256_load_si256(v), _mm256_load_si256(v + 1));
      const __m256i b = _mm256_xor_si256(_mm256_load_si256(v + 2), _mm256_load_si256(v + 3));
      acc[s] = _mm256_xor_si256(acc[s], _mm256_xor_si256(a, b));
    }
  }
  for (int64_t s = 1; s < kStreams; ++s) acc[0] = _mm256_xor_si256(acc[0], acc[s]);
  return acc[0];
}

}  // namespace

double read_bandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  // A share per thread of kStreams whole steps per piece; memory of the weights' kind (page size).
  const int64_t shares = pool.size(), piece = std::max<int64_t>(1, bytes / (shares * kStreams * kStep)) * kStep;
  const int64_t share = (piece + kStagger) * kStreams, total = piece * kStreams * shares;
  WeightBuffer mem(share * shares);
  uint8_t* buf = mem.data();
  const int64_t words = share * shares / 8;  // written once: an untouched page reads as the zero page
  pool.parallel_for(words, 1 << 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) reinterpret_cast<int64_t*>(buf)[i] = i;
  });
  std::vector<int64_t> sink(static_cast<size_t>(shares) * 8, 0);  // a line per share
  double best = 0.0;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(shares, 1, [&](int64_t a, int64_t b) {
      for (int64_t s = a; s < b; ++s) {
        const __m256i x = read_streams(buf + s * share, piece);
        sink[static_cast<size_t>(s * 8)] ^= _mm256_extract_epi64(x, 0);  // keeps the loads alive
      }
    });
    best = std::max(best, static_cast<double>(total) / seconds_since(t0));
  }
  volatile int64_t keep = sink[0];
  (void)keep;
  return best;
}

}  // namespace ember::kernels
