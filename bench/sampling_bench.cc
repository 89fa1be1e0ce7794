// Time per Sampler::sample() on a 151,936-token row (Qwen2/3's vocabulary) of random logits.
// The logits are roughly normal with standard deviation 3 (sum of 4 uniforms), a long-ish top tail
// like a language model's; the context for the penalties holds 512 tokens.
#include <benchmark/benchmark.h>

#include <vector>

#include "sampling/sampler.h"

namespace {

using ember::sampling::Rng;
using ember::sampling::Sampler;
using ember::sampling::SamplingParams;

constexpr size_t kVocab = 151936;

std::vector<float> logits() {
  Rng rng(1);
  std::vector<float> x(kVocab);
  for (float& v : x) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += rng.uniform() - 0.5;
    v = static_cast<float>(s * 3 / 0.577);  // sd of a sum of 4 uniforms is 0.577
  }
  return x;
}

std::vector<int32_t> context() {
  Rng rng(2);
  std::vector<int32_t> c(512);
  for (int32_t& t : c) t = static_cast<int32_t>(rng.next() % kVocab);
  return c;
}

SamplingParams params(int kind) {
  SamplingParams p;
  p.seed = 7;
  p.do_sample = kind != 0;
  p.top_k = 0;
  switch (kind) {
    case 1: p.top_k = 40; break;
    case 2: p.top_p = 0.9f; break;
    case 3: p.min_p = 0.05f; break;
    case 4: p.temperature = 0.8f; break;  // no filter: dense draw over the whole row
    case 5:                               // the full chain with penalties
      p.repetition_penalty = 1.1f;
      p.frequency_penalty = 0.5f;
      p.presence_penalty = 0.5f;
      p.logit_bias = {{5, 2.0f}, {77, -100.0f}};
      p.temperature = 0.7f;
      p.top_k = 50;
      p.top_p = 0.9f;
      p.min_p = 0.05f;
      p.typical_p = 0.95f;
      p.top_logprobs = 5;
      break;
  }
  return p;
}

void BM_Sample(benchmark::State& state) {
  const auto x = logits();
  const auto ctx = context();
  Sampler s(params(static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(x, ctx, 256));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_Sample)->Arg(0)->Name("greedy")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample)->Arg(1)->Name("top_k_40")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample)->Arg(2)->Name("top_p_0.9")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample)->Arg(3)->Name("min_p_0.05")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample)->Arg(4)->Name("temperature_only")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample)->Arg(5)->Name("full_chain_with_penalties")->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
