// Sampler::sample over a whole vocabulary's logits, the work between two decode steps: the
// default chain (top-k 40, temperature 0.8, top-p 0.95, min-p 0.05), greedy, and the chain with
// top-k off (softmax over the whole vocabulary). Vocabularies of llama (32,000) and qwen (151,936)
// size; logits drawn like a model's (normal, std 3). Reported as tokens sampled per second.
// Parity: tests/unit/sampler_test.cc.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "nexus/runtime/sampler.h"

namespace nexus {
namespace {

std::vector<float> logits_of(int64_t n_vocab) {
  std::vector<float> v(static_cast<size_t>(n_vocab));
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& x : v) x = d(rng);
  return v;
}

// range(0): vocabulary size; range(1): 0 default chain, 1 greedy, 2 top-k off.
void BM_Sample(benchmark::State& state) {
  const int64_t n_vocab = state.range(0);
  const std::vector<float> logits = logits_of(n_vocab);
  SamplerParams p;
  p.seed = 1;
  if (state.range(1) == 1) p.temperature = 0.0f;
  if (state.range(1) == 2) p.top_k = 0;
  Sampler s(p, n_vocab);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Sample)->ArgsProduct({{32000, 151936}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nexus
