// The core's arithmetic peaks, the yardstick for the matmul kernels' FLOP/s: float32 FMA (256- and
// 512-bit), AVX2's int8 dot product (vpmaddubsw, which the quantized kernels use where there is no
// VNNI), and where the CPU has them the BF16 dot product (vdpbf16ps) and int8 VNNI (vpdpbusd). Each
// loop runs kChains independent accumulator chains (more than latency x ports), on registers only;
// the results are stored after the loop so no work can be dropped (the asm of each loop body is
// kChains of the one instruction, and for AVX2's int8 an add). Counted as 2 operations per
// multiply-add; one vdpbf16ps lane does 2 multiply-adds, one vpdpbusd lane 4, one vpmaddubsw 32 per
// 256 bits.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;        // 2 ports x 4-cycle latency = 8 in flight at least
constexpr int64_t kIters = 1 << 20;  // iterations of one timed run per thread

// kChains chains of `step` (one instruction each) per iteration. The empty asm claims to change a
// and b, so the compiler can neither hoist nor fold the chains. A macro, not a lambda: the
// intrinsics inline only into functions of their target.
#define EMBER_PEAK_CHAINS(acc, a, b, step)                          \
  for (int64_t i = 0; i < kIters; ++i) {                            \
    _Pragma("GCC unroll 16") for (int c = 0; c < kChains; ++c) acc[c] = step; \
    asm volatile("" : "+v"(a), "+v"(b));                            \
  }

[[gnu::target("avx2,fma")]] void fma256(float* out) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  EMBER_PEAK_CHAINS(acc, a, b, _mm256_fmadd_ps(a, acc[c], b))
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  _mm256_storeu_ps(out, sum);
}

// u8 x s8 pairs summed to s16 (vpmaddubsw) and added to a 16-bit accumulator: the multiply port's
// bound (the kernels widen to 32 bits with vpmaddwd once per one or two of these). The chain's own
// accumulator is the u8 operand so no chain shares a product with another.
[[gnu::target("avx2")]] void maddubs256(int32_t* out) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  __m256i a = _mm256_set1_epi8(-2), b = _mm256_set1_epi8(1);
  EMBER_PEAK_CHAINS(acc, a, b, _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(acc[c], a)))
  __m256i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_epi32(sum, acc[c]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), sum);
}

[[gnu::target("avx512f")]] void fma512(float* out) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  EMBER_PEAK_CHAINS(acc, a, b, _mm512_fmadd_ps(a, acc[c], b))
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  _mm512_storeu_ps(out, sum);
}

[[gnu::target("avx512f,avx512bf16")]] void dpbf16(float* out) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a83);
  EMBER_PEAK_CHAINS(acc, a, b, _mm512_dpbf16_ps(acc[c], a, b))
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  _mm512_storeu_ps(out, sum);
}

[[gnu::target("avx512f,avx512vnni")]] void dpbusd(int32_t* out) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  EMBER_PEAK_CHAINS(acc, a, b, _mm512_dpbusd_epi32(acc[c], a, b))
  __m512i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  _mm512_storeu_si512(out, sum);
}

// Runs kernel `reps` times on each of `threads` threads started together; returns the operations per
// second of the whole machine (ops per instruction x chains x iterations x reps x threads / wall time).
double rate(int threads, double ops, void (*kernel)(void*)) {
  constexpr int kReps = 40;  // about 0.1 s per thread
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  auto body = [&] {
    ready.fetch_add(1);
    while (!go.load()) {
    }
    for (int r = 0; r < kReps; ++r) {
      alignas(64) int32_t out[16];
      kernel(out);
      asm volatile("" : : "r"(out) : "memory");  // the results are used
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(body);
  while (ready.load() < threads) {
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ops * kChains * kIters * kReps * threads / s;
}

struct Probe {
  const char* name;
  bool supported;
  double ops;  // operations per instruction: lanes x 2 per multiply-add
  void (*kernel)(void*);
};

}  // namespace

// Prints, per probe and thread count, the median and best of 5 runs (a shared machine is noisy: the
// best is the closest to the peak).
int main() {
  const Probe probes[] = {
      {"fp32 fma 256-bit (vfmadd231ps ymm)", __builtin_cpu_supports("fma") != 0, 8 * 2,
       [](void* o) { fma256(static_cast<float*>(o)); }},
      {"int8 dot 256-bit (vpmaddubsw ymm)", __builtin_cpu_supports("avx2") != 0, 32 * 2,
       [](void* o) { maddubs256(static_cast<int32_t*>(o)); }},
      {"fp32 fma 512-bit (vfmadd231ps zmm)", __builtin_cpu_supports("avx512f") != 0, 16 * 2,
       [](void* o) { fma512(static_cast<float*>(o)); }},
      {"bf16 dot (vdpbf16ps zmm)", __builtin_cpu_supports("avx512bf16") != 0, 16 * 2 * 2,
       [](void* o) { dpbf16(static_cast<float*>(o)); }},
      {"int8 dot (vpdpbusd zmm)", __builtin_cpu_supports("avx512vnni") != 0, 16 * 4 * 2,
       [](void* o) { dpbusd(static_cast<int32_t*>(o)); }},
  };
  std::printf("%-36s %7s %14s %14s\n", "probe", "threads", "median GOP/s", "best GOP/s");
  for (const Probe& p : probes)
    for (int threads : {1, 2}) {
      if (!p.supported) {
        std::printf("%-36s %7d %14s %14s\n", p.name, threads, "n/a", "n/a");
        continue;
      }
      std::vector<double> r;
      for (int i = 0; i < 5; ++i) r.push_back(rate(threads, p.ops, p.kernel) / 1e9);
      std::sort(r.begin(), r.end());
      std::printf("%-36s %7d %14.1f %14.1f\n", p.name, threads, r[2], r[4]);
    }
  return 0;
}
