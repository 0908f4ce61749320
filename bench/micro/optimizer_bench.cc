// AdamW step and global-norm clipping on 15.2M parameters (the L15M model's count): the scalar
// loop, the AVX2 loop, AdamW::step and Adafactor::step with 1 and 2 threads. AdamW reads p, g, m,
// v and writes p, m, v: 28 bytes per parameter, reported as bytes_per_second; clipping reads g
// once (4 bytes) and, when it scales, reads and writes it again.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backends/cpu/optim.h"
#include "backends/cpu/quant.h"
#include "nexus/train/optimizer.h"

namespace nexus::train {
namespace {

constexpr size_t kN = 15191712;  // 32000*288 + 6*(4*288*288 + 3*768*288 + 2*288) + 288

struct Arrays {
  std::vector<float> p, g, m, v;
  Arrays() : p(kN), g(kN), m(kN, 0.0f), v(kN, 0.0f) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 0.02f);
    for (size_t i = 0; i < kN; ++i) {
      p[i] = d(rng);
      g[i] = d(rng) * 0.1f;
    }
  }
};

Arrays& arrays() {
  static Arrays a;
  return a;
}

const cpu::optim::AdamWCoef kCoef{0.9f, 0.95f, 0.9999f, 1e-3f, 1.0f, 1e-8f};

void BM_AdamWLoopScalar(benchmark::State& state) {
  Arrays& a = arrays();
  for (auto _ : state)
    cpu::optim::adamw_scalar(a.p.data(), a.g.data(), a.m.data(), a.v.data(), kN, kCoef);
  state.SetBytesProcessed(state.iterations() * int64_t{28} * static_cast<int64_t>(kN));
}
BENCHMARK(BM_AdamWLoopScalar)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AdamWLoopAvx2(benchmark::State& state) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) return state.SkipWithError("no AVX2");
  Arrays& a = arrays();
  for (auto _ : state)
    cpu::optim::adamw_avx2(a.p.data(), a.g.data(), a.m.data(), a.v.data(), kN, kCoef);
  state.SetBytesProcessed(state.iterations() * int64_t{28} * static_cast<int64_t>(kN));
}
BENCHMARK(BM_AdamWLoopAvx2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The optimizer as the trainer calls it (active ISA, chunks of 64K, `threads` threads).
void BM_AdamWStep(benchmark::State& state) {
  Arrays& a = arrays();
  const std::vector<ParamInfo> t = {{"w", {52749, 288}, 0, static_cast<int64_t>(kN)}};
  AdamW opt(t, {});
  opt.set_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) opt.step(a.p, a.g, 1e-3f);
  state.SetBytesProcessed(state.iterations() * int64_t{28} * static_cast<int64_t>(kN));
}
BENCHMARK(BM_AdamWStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Adafactor on the same count as one [52749, 288] matrix: reads g three times and p once,
// writes p (20 bytes per parameter); its state is a few hundred KB.
void BM_AdafactorStep(benchmark::State& state) {
  Arrays& a = arrays();
  const std::vector<ParamInfo> t = {{"w", {52749, 288}, 0, static_cast<int64_t>(kN)}};
  Adafactor opt(t, {});
  opt.set_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) opt.step(a.p, a.g, 1e-5f);
  state.SetBytesProcessed(state.iterations() * int64_t{20} * static_cast<int64_t>(kN));
}
BENCHMARK(BM_AdafactorStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Norm only (max_norm large: no scaling pass): 4 bytes per parameter.
void BM_ClipNorm(benchmark::State& state) {
  Arrays& a = arrays();
  ThreadPool pool(static_cast<int>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(clip_grad_norm(a.g, 1e30f, state.range(0) > 1 ? &pool : nullptr));
  state.SetBytesProcessed(state.iterations() * int64_t{4} * static_cast<int64_t>(kN));
}
BENCHMARK(BM_ClipNorm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace nexus::train
