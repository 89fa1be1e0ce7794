// Micro-benchmarks of the matmul kernels: decode (one token, bandwidth-bound: bytes/s of weights) and
// prefill (64 tokens, compute-bound: FLOP/s), per weight type and instruction set.
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gguf_quants.h"
#include "kernels/matmul.h"
#include "kernels/membw.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/weight_buffer.h"

namespace ember::kernels {
namespace {

// Weight types: 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_k, 6 q5_k, 7 q6_k, 8 q3_k, 9 iq4_xs (random ggml
// blocks); and kBf16Acts, bf16 with BF16-rounded activations (the BF16 dot product where the CPU has it).
constexpr int kKinds = 10;
constexpr int kBf16Acts = 10;
struct Fixture {
  std::vector<float> wf;
  std::vector<uint16_t> wh;
  QuantizedMatrix qm;
  PackedMatrix pm;
  WeightMatrix w;
  Fixture(int kind, int64_t rows, int64_t cols, ThreadPool& pool) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    if (kind < 5 || kind == kBf16Acts) {  // the K-quants are random blocks, not made from floats
      wf.resize(static_cast<size_t>(rows * cols));
      for (auto& v : wf) v = d(rng);
    }
    w = WeightMatrix{wf.data(), DType::F32, rows, cols};
    if (kind == 1 || kind == 2 || kind == kBf16Acts) {
      wh.resize(wf.size());
      for (size_t i = 0; i < wf.size(); ++i) wh[i] = kind == 1 ? f32_to_f16(wf[i]) : f32_to_bf16(wf[i]);
      w = WeightMatrix{wh.data(), kind == 1 ? DType::F16 : DType::BF16, rows, cols};
    }
    if (kind >= 5 && kind < kKinds) {  // random bytes with a small float16 d (and dmin) in every super-block
      constexpr GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::IQ4_XS};
      const GgmlType t = kTypes[kind - 5];
      const int64_t bb = ggml_type_info(t).block_bytes, n = rows * cols / kQK_K;
      std::vector<uint8_t> blocks(static_cast<size_t>(n * bb));
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& b : blocks) b = static_cast<uint8_t>(byte(rng));
      const uint16_t h = f32_to_f16(0.01f);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t at : t == GgmlType::Q6_K   ? std::vector<int64_t>{208}
                          : t == GgmlType::Q3_K   ? std::vector<int64_t>{108}
                          : t == GgmlType::IQ4_XS ? std::vector<int64_t>{0}
                                                  : std::vector<int64_t>{0, 2})
          std::memcpy(blocks.data() + i * bb + at, &h, 2);
      qm = from_ggml_blocks(t, blocks.data(), rows, cols, pool);
      w = qm.view();
    } else if (kind >= 3 && kind < kKinds) {
      qm = quantize(w, kind == 3 ? QType::Q8_0 : QType::Q4_0, pool);
      w = qm.view();
    } else {
      pm = pack(w, pool);
      w = pm.view();
      w.bf16_activations = kind == kBf16Acts;
    }
  }
};

// Times matmul of f.w (rows x cols) with n tokens of constant activations; reports FLOP/s.
void time_matmul(benchmark::State& state, const Fixture& f, int64_t n, int64_t rows, int64_t cols, ThreadPool& pool,
                 Isa isa) {
  std::vector<float> x(n * cols, 0.5f), y(n * rows);
  for (auto _ : state) {
    matmul(f.w, x.data(), n, y.data(), pool, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int64_t n = state.range(1), rows = 2048, cols = 8192;
  const Isa isa = static_cast<Isa>(state.range(2));
  if (!isa_supported(isa)) {
    state.SkipWithError("instruction set not supported here");
    return;
  }
  ThreadPool pool(static_cast<int>(state.range(3)));
  Fixture f(kind, rows, cols, pool);
  time_matmul(state, f, n, rows, cols, pool, isa);
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(weight_bytes(f.w)) * state.iterations(), benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "tokens", "isa", "threads"});
  for (int isa : {1, 2})
    for (int kind = 0; kind < kKinds; ++kind)
      for (int n : {1, 16, 64}) b->Args({kind, n, isa, 1});  // decode, a batched decode step, prefill
  for (int isa : {1, 2})
    for (int kind = 0; kind < kKinds; ++kind) b->Args({kind, 1, isa, 2});  // decode on both cores
  for (int kind = 0; kind < kKinds; ++kind) b->Args({kind, 16, 1, 2});
  for (int kind = 3; kind < kKinds; ++kind) b->Args({kind, 64, 2, 2});  // quantized prefill, AVX-512, 2 threads
  for (int n : {1, 4, 16, 64})  // bf16 with BF16-rounded activations: the BF16 dot product from 3 tokens on
    for (int threads : {1, 2}) b->Args({kBf16Acts, n, 2, threads});
  // Plain weights' prefill on both cores, per panel kernel (16 tokens of AVX2 are above).
  for (int kind = 0; kind < 3; ++kind) {
    b->Args({kind, 64, 1, 2});
    b->Args({kind, 16, 2, 2});
    b->Args({kind, 64, 2, 2});
  }
}

BENCHMARK(BM_Matmul)->Apply(Args)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Decode from memory: `tokens` tokens (one, or a verification pass of a few) against a matrix of
// about kStreamBytes (8192 columns, like the down projection: panels 256 KiB apart), far past the
// caches, at the best instruction set. Reports the weights' bytes/s and its fraction of the read
// bandwidth that ember bench's roofline takes (kernels/membw.h), measured just before the decode
// with the same threads: a decode at the roofline reaches 1.
constexpr int64_t kStreamBytes = int64_t{256} << 20;

void BM_DecodeStream(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int64_t cols = 8192;
  ThreadPool pool(static_cast<int>(state.range(1)));
  // Rows for kStreamBytes, from what 16 rows of the type take (panels and groups are 16 rows).
  const int64_t group_bytes = weight_bytes(Fixture(kind, 16, cols, pool).w);
  Fixture f(kind, kStreamBytes / group_bytes * 16, cols, pool);
  f.wf = {};  // the source floats: only the weights should be resident
  const double bw = read_bandwidth(pool);
  const int64_t n = state.range(2);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * f.w.rows));
  for (auto _ : state) {
    matmul(f.w, x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(weight_bytes(f.w)) * static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  state.counters["roofline_bytes/s"] = bw;
  state.counters["of_roofline"] = benchmark::Counter(bytes / bw, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeStream)->ArgNames({"type", "threads", "tokens"})->ArgsProduct({{1, 2, 3, 4, 5, 7}, {1, 2}, {1}})->Unit(benchmark::kMillisecond)->UseRealTime();
// A speculative verification pass (or a batched step of a few sequences) streams the same bytes:
// where its arithmetic keeps up, it costs what decoding one token does.
BENCHMARK(BM_DecodeStream)->ArgNames({"type", "threads", "tokens"})->ArgsProduct({{1, 2, 4, kBf16Acts}, {1, 2}, {2, 3, 4, 8}})->Unit(benchmark::kMillisecond)->UseRealTime();

// One thread at the best instruction set: weight type state.range(0), state.range(1) tokens.
void time_one_thread(benchmark::State& state, int64_t rows, int64_t cols) {
  ThreadPool pool(1);
  const Fixture f(static_cast<int>(state.range(0)), rows, cols, pool);
  time_matmul(state, f, state.range(1), rows, cols, pool, best_isa());
}

// The kernels' arithmetic rate with the weights in L2 (128 x 2048, at most 1 MiB in f32): decode's
// ceiling apart from memory, per weight type.
void BM_MatmulCached(benchmark::State& state) { time_one_thread(state, 128, 2048); }
BENCHMARK(BM_MatmulCached)->ArgNames({"type", "tokens"})->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// A small model's fused gate/up product (chat-skills: 2 x 640 rows of 256 columns, cache-resident):
// decode of one sequence, verification passes of a few tokens and a batched step of 16 (what
// serving runs).
void BM_MatmulSmall(benchmark::State& state) { time_one_thread(state, 1280, 256); }
BENCHMARK(BM_MatmulSmall)->ArgNames({"type", "tokens"})->ArgsProduct({{0, 2}, {1, 2, 3, 4, 5, 6, 8, 9, 16}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// One batched decode step's attention, chat-skills' shape (8 query heads, 4 kv heads of 32) over a
// paged cache (f32, or bf16 / q8_0 rows reinterpreted from the float buffers): 16 sequences, one new
// token each, `positions` cached positions; one thread.
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t positions = state.range(0), seqs = 16, block = 16;
  const KvType kv_type = std::array{KvType::F32, KvType::BF16, KvType::Q8_0}[static_cast<size_t>(state.range(1))];
  const AttentionShape s{8, 4, 32, 0, 1.0f / std::sqrt(32.0f), 0.0f};
  const int64_t kv_dim = s.n_kv_heads * s.head_dim, n_blocks = (positions + block - 1) / block;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<std::vector<float>> k(static_cast<size_t>(seqs * n_blocks)), v(k.size());
  std::vector<const void*> kp, vp;
  for (size_t i = 0; i < k.size(); ++i) {
    k[i].resize(static_cast<size_t>(block * kv_dim));
    v[i].resize(k[i].size());
    for (auto& e : k[i]) e = d(rng);
    for (auto& e : v[i]) e = d(rng);
    kp.push_back(k[i].data());
    vp.push_back(v[i].data());
  }
  std::vector<float> q(static_cast<size_t>(seqs * s.n_heads * s.head_dim)), out(q.size());
  for (auto& e : q) e = d(rng);
  std::vector<AttentionItem> items;
  for (int64_t i = 0; i < seqs; ++i)
    items.push_back({q.data() + i * s.n_heads * s.head_dim, 1, positions - 1,
                     KvView{kp.data() + i * n_blocks, vp.data() + i * n_blocks, block, kv_type},
                     out.data() + i * s.n_heads * s.head_dim});
  ThreadPool pool(1);
  for (auto _ : state) {
    attention(items, s, pool);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_AttentionDecode)->ArgNames({"positions", "f32_bf16_q8"})->ArgsProduct({{65, 300}, {0, 1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// One decode step's attention over a long context, Llama-3.2-1B's shape (32 query heads, 8 kv heads
// of 64, 16 layers) in the model's cache layout: blocks of 16 positions holding every layer's f16
// keys and values (512 KiB apart), on 2 MiB pages; one sequence, one thread, each layer in turn, so
// that the rows come from memory. Time of the 16 layers; bytes/s counts the keys and values read.
void BM_AttentionDecodeLong(benchmark::State& state) {
  const int64_t positions = state.range(0), block = 16, layers = 16;
  const AttentionShape s{32, 8, 64, 0, 1.0f / 8.0f, 0.0f};
  const int64_t row_bytes = kv_row_bytes(KvType::F16, s.head_dim), chunk = block * s.n_kv_heads * row_bytes;
  const int64_t n_blocks = (positions + block - 1) / block, stride = layers * 2 * chunk;
  WeightBuffer cache(n_blocks * stride);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> row(static_cast<size_t>(s.head_dim));
  std::vector<const void*> kp, vp;  // [layer][block]
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* k = cache.data() + b * stride + l * 2 * chunk;
      for (int64_t r = 0; r < 2 * block * s.n_kv_heads; ++r) {
        for (auto& e : row) e = d(rng);
        store_kv_row(row.data(), s.head_dim, KvType::F16, k + r * row_bytes);
      }
      kp.push_back(k);
      vp.push_back(k + chunk);
    }
  std::vector<float> q(static_cast<size_t>(s.n_heads * s.head_dim)), out(q.size());
  for (auto& e : q) e = d(rng);
  ThreadPool pool(1);
  for (auto _ : state)
    for (int64_t l = 0; l < layers; ++l) {
      const AttentionItem item{q.data(), 1, positions - 1,
                               KvView{kp.data() + l * n_blocks, vp.data() + l * n_blocks, block, KvType::F16}, out.data()};
      attention(std::span(&item, 1), s, pool);
      benchmark::DoNotOptimize(out.data());
    }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(layers * 2 * positions * s.n_kv_heads * row_bytes),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecodeLong)->ArgName("positions")->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A prompt's attention in one layer, Llama-3.2-1B's shape (32 query heads, 8 kv heads of 64), over
// an f16 cache of the prompt itself (causal, from position 0); one thread. FLOP/s counts the score
// and weighted-sum products (4 * head size per query head and visible key).
void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t tokens = state.range(0), block = 16;
  const AttentionShape s{32, 8, 64, 0, 1.0f / 8.0f, 0.0f};
  const int64_t n_blocks = (tokens + block - 1) / block;
  const int64_t row_bytes = kv_row_bytes(KvType::F16, s.head_dim);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<std::vector<uint8_t>> k(static_cast<size_t>(n_blocks)), v(k.size());
  std::vector<const void*> kp, vp;
  std::vector<float> row(static_cast<size_t>(s.head_dim));
  for (size_t b = 0; b < k.size(); ++b) {
    k[b].resize(static_cast<size_t>(block * s.n_kv_heads * row_bytes));
    v[b].resize(k[b].size());
    for (int64_t r = 0; r < block * s.n_kv_heads; ++r) {
      for (auto& e : row) e = d(rng);
      store_kv_row(row.data(), s.head_dim, KvType::F16, k[b].data() + r * row_bytes);
      for (auto& e : row) e = d(rng);
      store_kv_row(row.data(), s.head_dim, KvType::F16, v[b].data() + r * row_bytes);
    }
    kp.push_back(k[b].data());
    vp.push_back(v[b].data());
  }
  std::vector<float> q(static_cast<size_t>(tokens * s.n_heads * s.head_dim)), out(q.size());
  for (auto& e : q) e = d(rng);
  const AttentionItem item{q.data(), tokens, 0, KvView{kp.data(), vp.data(), block, KvType::F16}, out.data()};
  ThreadPool pool(1);
  for (auto _ : state) {
    attention(std::span(&item, 1), s, pool);
    benchmark::DoNotOptimize(out.data());
  }
  const double pairs = static_cast<double>(s.n_heads) * static_cast<double>(tokens * (tokens + 1) / 2);
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(s.head_dim) * pairs,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionPrefill)->ArgName("tokens")->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ember::kernels

BENCHMARK_MAIN();
