// The selective scan at mamba2-130m's shape (24 heads of 64, state 128, one group), per variant,
// prompt length and thread count: one ssm_scan call for one layer. Counter "GFLOP/s": the SSD
// form's products (C B^T per group and chunk; per head C S, M X and B^T X, each 2 m n k, the
// masked L x L product counted whole), so variants compare on the same work. Parity:
// tests/parity/op_registry_test.cc (SsmScan).
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
  const double chunks = double((t + L - 1) / L);
  const double flops =
      chunks * (2.0 * L * L * N * groups + heads * 2.0 * (L * P * N + L * L * P + N * L * P));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k.name);
}

void ScanArgs(benchmark::internal::Benchmark* b) {
  const int64_t n = static_cast<int64_t>(cpu::ssm_scan_kernels().size());
  for (int64_t v = 0; v < n; ++v)
    for (int64_t t : {512, 2048})
      for (int64_t th : {1, 2}) b->Args({v, t, th});
}
BENCHMARK(BM_SsmScan)->Apply(ScanArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace nexus
