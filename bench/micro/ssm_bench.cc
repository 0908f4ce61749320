// The selective scan, per variant and thread count: one ssm_scan call for one layer at
// mamba2-130m's shape (24 heads of 64, state 128, one group) and 16 to 2,048 tokens, and its
// backward at the training shapes of the demo hybrid (16 x 128 tokens, 4 heads of 64, state 64)
// and of mamba2-130m (4 x 512). Counter "GFLOP/s": the SSD form's products, each 2 m n k with the
// masked L x L products counted whole, so variants compare on the same work. Forward: C B^T per
// group and chunk; per head C S, M X and B^T X. Backward: per head the states recomputed (B^T X),
// C S, B dS, (e dY) S^T, XW dS^T, C^T (e dY), M^T dY and dY X^T; per group C B^T, dG B, dG^T C.
// Parity: tests/parity/op_registry_test.cc (SsmScan, SsmScanBackwardVariants).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/ssm.h"
#include "nexus/core/thread_pool.h"

namespace nexus {
namespace {

void BM_SsmScan(benchmark::State& state) {
  const KernelVariants<SsmScanArgs> variants = cpu::ssm_scan_kernels();
  const auto& k = variants[static_cast<size_t>(state.range(0))];
  const int64_t t = state.range(1), threads = state.range(2);
  const int64_t heads = 24, P = 64, N = 128, groups = 1, L = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, float scale) {
    for (float& x : v) x = scale * nd(rng);
  };
  std::vector<float> x(t * heads * P), dt(t * heads), a(heads), B(t * groups * N),
      C(t * groups * N), d(heads), st(heads * P * N), y(t * heads * P);
  fill(x, 1.0f);
  fill(B, 0.3f);
  fill(C, 0.3f);
  fill(d, 1.0f);
  for (float& v : dt) v = 0.02f + 0.1f * std::fabs(nd(rng));
  for (float& v : a) v = -1.0f - std::fabs(nd(rng));
  const SsmScanArgs args{x.data(), heads * P, dt.data(), heads, a.data(), 1, B.data(), C.data(),
                         groups * N, d.data(), st.data(), y.data(), 1, t, heads, P, N, groups};
  if (!k.runs(args)) {
    state.SkipWithError((std::string(k.name) + " does not run here").c_str());
    return;
  }
  ThreadPool pool(static_cast<int>(threads));
  for (auto _ : state) {
    std::fill(st.begin(), st.end(), 0.0f);
    k.run(args, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  double flops = 0.0;
  for (int64_t c0 = 0; c0 < t; c0 += L) {
    const double n = double(std::min(L, t - c0));
    flops += 2.0 * n * n * N * groups + heads * 2.0 * (n * P * N + n * n * P + N * n * P);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k.name);
}

struct Shape {
  int64_t b, t, heads, P, N;
};
constexpr Shape kBackwardShapes[] = {{16, 128, 4, 64, 64}, {4, 512, 24, 64, 128}};

void BM_SsmScanBackward(benchmark::State& state) {
  const KernelVariants<SsmScanBackwardArgs> variants = cpu::ssm_scan_backward_kernels();
  const auto& k = variants[static_cast<size_t>(state.range(0))];
  const Shape sh = kBackwardShapes[state.range(1)];
  const int64_t threads = state.range(2), L = 64;
  const int64_t rows = sh.b * sh.t, HP = sh.heads * sh.P;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto filled = [&](int64_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * nd(rng);
    return v;
  };
  std::vector<float> x = filled(rows * HP, 1.0f), B = filled(rows * sh.N, 0.3f),
                     C = filled(rows * sh.N, 0.3f), d = filled(sh.heads, 1.0f),
                     dy = filled(rows * HP, 1.0f), dt(rows * sh.heads), a(sh.heads);
  for (float& v : dt) v = 0.02f + 0.1f * std::fabs(nd(rng));
  for (float& v : a) v = -1.0f - std::fabs(nd(rng));
  std::vector<float> dx(rows * HP), ddt(rows * sh.heads), dB(rows * sh.N), dC(rows * sh.N),
      da(sh.heads), dd(sh.heads);
  const SsmScanArgs fwd{x.data(), HP,      dt.data(), sh.heads, a.data(), 1,
                        B.data(), C.data(), sh.N,     d.data(),  nullptr,  nullptr,
                        sh.b,     sh.t,     sh.heads, sh.P,      sh.N,     1};
  const SsmScanBackwardArgs args{fwd,       dy.data(), dx.data(), ddt.data(),
                                 dB.data(), dC.data(), da.data(), dd.data()};
  if (!k.runs(args)) {
    state.SkipWithError((std::string(k.name) + " does not run here").c_str());
    return;
  }
  ThreadPool pool(static_cast<int>(threads));
  for (auto _ : state) {
    k.run(args, &pool);
    benchmark::DoNotOptimize(dx.data());
  }
  const double chunks = double(sh.b * ((sh.t + L - 1) / L)), P = double(sh.P), N = double(sh.N);
  const double flops = chunks * (3 * 2.0 * L * L * N +
                                 sh.heads * (6 * 2.0 * L * N * P + 2 * 2.0 * L * L * P));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k.name);
}

void BackwardArgs(benchmark::internal::Benchmark* b) {
  const int64_t n = static_cast<int64_t>(cpu::ssm_scan_backward_kernels().size());
  for (int64_t v = 0; v < n; ++v)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t th : {1, 2}) b->Args({v, s, th});
}
BENCHMARK(BM_SsmScanBackward)->Apply(BackwardArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// The causal conv + SiLU at mamba2-130m's prefill (one sequence of 512 tokens, 1,792 channels, x
// rows 3,352 floats apart as in the input projection's output) and the demo hybrid's training
// batch (16 x 128 tokens, 384 channels of 644), 4 taps.
void BM_SsmConv(benchmark::State& state) {
  const KernelVariants<SsmConvArgs> variants = cpu::ssm_conv_kernels();
  const auto& k = variants[static_cast<size_t>(state.range(0))];
  const bool train = state.range(1) != 0;
  const int64_t threads = state.range(2);
  const int64_t b = train ? 16 : 1, t = train ? 128 : 512, ch = train ? 384 : 1792,
                ld = train ? 644 : 3352, taps = 4;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(b * t * ld), w(ch * taps), bias(ch), pre(b * t * ch), y(b * t * ch),
      st(b * (taps - 1) * ch, 0.0f);
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = 0.3f * nd(rng);
  const SsmConvArgs args{x.data(), ld,          train ? nullptr : st.data(), w.data(), bias.data(),
                         train ? pre.data() : nullptr, y.data(), b, t, ch, taps};
  ThreadPool pool(static_cast<int>(threads));
  for (auto _ : state) {
    k.run(args, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(
      double(b * t * ch) * 4.0 * (train ? 3.0 : 2.0), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(k.name) + (train ? " train" : " prefill"));
}
BENCHMARK(BM_SsmConv)
    ->ArgsProduct({{0}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void ScanArgs(benchmark::internal::Benchmark* b) {
  const int64_t n = static_cast<int64_t>(cpu::ssm_scan_kernels().size());
  for (int64_t v = 0; v < n; ++v)
    for (int64_t t : {16, 32, 64, 512, 2048})
      for (int64_t th : {1, 2}) b->Args({v, t, th});
}
BENCHMARK(BM_SsmScan)->Apply(ScanArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace nexus
