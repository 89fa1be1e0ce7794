#include "kernels/membw.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/clock.h"

namespace ember::kernels {

double read_bandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  const int64_t n = bytes / 32;
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(64, static_cast<size_t>(n) * 32), &std::free);
  __m256i* buf = static_cast<__m256i*>(mem.get());
  pool.parallel_for(n, 4096, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) buf[i] = _mm256_set1_epi64x(i);
  });
  std::vector<double> rates;
  std::vector<int64_t> sink(static_cast<size_t>(pool.size()) * 64, 0);
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, 1 << 16, [&](int64_t a, int64_t b) {
      // Four independent accumulators keep several loads in flight.
      __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
      int64_t i = a;
      for (; i + 4 <= b; i += 4) {
        s0 = _mm256_xor_si256(s0, _mm256_load_si256(&buf[i]));
        s1 = _mm256_xor_si256(s1, _mm256_load_si256(&buf[i + 1]));
        s2 = _mm256_xor_si256(s2, _mm256_load_si256(&buf[i + 2]));
        s3 = _mm256_xor_si256(s3, _mm256_load_si256(&buf[i + 3]));
      }
      for (; i < b; ++i) s0 = _mm256_xor_si256(s0, _mm256_load_si256(&buf[i]));
      const __m256i s = _mm256_xor_si256(_mm256_xor_si256(s0, s1), _mm256_xor_si256(s2, s3));
      sink[static_cast<size_t>(a % 64)] ^= _mm256_extract_epi64(s, 0);  // keeps the loads alive
    });
    const double secs = seconds_since(t0);
    rates.push_back(static_cast<double>(n * 32) / secs);
  }
  std::sort(rates.begin(), rates.end());
  volatile int64_t keep = sink[0];
  (void)keep;
  return rates[rates.size() / 2];
}

}  // namespace ember::kernels
