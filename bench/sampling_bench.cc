// Time per Sampler::sample() on a 151,936-token row (Qwen2/3's vocabulary) of random logits.
// "flat": logits roughly normal with standard deviation 3 (sum of 4 uniforms): a hard case, the 0.9
// nucleus holds ~14k tokens. "peaked": the same plus +12 on 32 random tokens, closer to a language
// model's row, where a few tokens hold most of the mass. The context for the penalties holds 512 tokens.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace {

using ember::sampling::Rng;
using ember::sampling::Sampler;
using ember::sampling::SamplingParams;

constexpr size_t kVocab = 151936;

std::vector<float> logits(bool peaked) {
  Rng rng(1);
  std::vector<float> x(kVocab);
  for (float& v : x) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += rng.uniform() - 0.5;
    v = static_cast<float>(s * 3 / 0.577);  // sd of a sum of 4 uniforms is 0.577
  }
  if (peaked)
    for (int i = 0; i < 32; ++i) x[rng.next() % kVocab] += 12.0f;
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
  const auto x = logits(state.range(1) != 0);
  const auto ctx = context();
  Sampler s(params(static_cast<int>(state.range(0))));
  static const char* kNames[] = {"greedy", "top_k_40", "top_p_0.9", "min_p_0.05", "temperature_only",
                                 "full_chain_with_penalties"};
  state.SetLabel(std::string(kNames[state.range(0)]) + (state.range(1) ? " peaked" : " flat"));
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(x, ctx, 256));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

// Arguments: {kind, peaked}.
void Cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"kind", "peaked"});
  for (int peaked : {0, 1})
    for (int kind = 0; kind <= 5; ++kind) b->Args({kind, peaked});
}
BENCHMARK(BM_Sample)->Apply(Cases)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
