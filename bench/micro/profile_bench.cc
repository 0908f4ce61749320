// Cost of one profiler scope with profiling off (the price every instrumented op always pays) and
// on (per recorded span), next to an empty loop and a steady_clock read for reference.
#include <benchmark/benchmark.h>

#include <chrono>

#include "nexus/profile.h"

namespace nexus {
namespace {

// Recording keeps every span; a periodic reset bounds the buffer (its chunks are reused).
constexpr int64_t kResetEvery = 1 << 16;

void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) benchmark::ClobberMemory();
}
BENCHMARK(BM_EmptyLoop);

void BM_SteadyClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_SteadyClockNow);

void BM_ScopeOff(benchmark::State& state) {
  profile::stop();
  for (auto _ : state) {
    NEXUS_PROFILE_SCOPE("bench");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ScopeOff);

void BM_OpScopeOff(benchmark::State& state) {
  profile::stop();
  int64_t n = state.range(0);
  for (auto _ : state) {
    NEXUS_PROFILE_OP("bench_op", 3, n * 4, n * 2,
                     profile::text("x[%lld]", static_cast<long long>(n)));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_OpScopeOff)->Arg(4096);

// A nested phase span (the common case: inside a decode step). An enclosing span is kept open so
// that this one is not top-level, which would add a memory sample at each end.
void BM_ScopeOn(benchmark::State& state) {
  profile::reset();
  profile::start();
  int64_t i = 0;
  {
    NEXUS_PROFILE_SCOPE("enclosing");
    for (auto _ : state) {
      {
        NEXUS_PROFILE_SCOPE("bench");
        benchmark::ClobberMemory();
      }
      if (++i % kResetEvery == 0) profile::reset();
    }
  }
  profile::stop();
  profile::reset();
}
BENCHMARK(BM_ScopeOn);

// A top-level phase span: also samples mem_stats() at begin and end (two mutexes each).
void BM_TopLevelPhaseOn(benchmark::State& state) {
  profile::reset();
  profile::start();
  int64_t i = 0;
  for (auto _ : state) {
    {
      NEXUS_PROFILE_SCOPE("bench");
      benchmark::ClobberMemory();
    }
    if (++i % kResetEvery == 0) profile::reset();
  }
  profile::stop();
  profile::reset();
}
BENCHMARK(BM_TopLevelPhaseOn);

// An op span with its arguments; Arg(1) adds a formatted shapes string (snprintf on the stack,
// copied into the thread's string pool), as the forward pass does.
void BM_OpScopeOn(benchmark::State& state) {
  profile::reset();
  profile::start();
  const bool shapes = state.range(0) != 0;
  const int64_t n = 4096;
  int64_t i = 0;
  {
    NEXUS_PROFILE_SCOPE("enclosing");
    for (auto _ : state) {
      {
        NEXUS_PROFILE_OP(
            "bench_op", 3, n * 4, n * 2,
            shapes ? profile::text("x[%lld]", static_cast<long long>(n)) : profile::Text{});
        benchmark::ClobberMemory();
      }
      if (++i % kResetEvery == 0) profile::reset();
    }
  }
  profile::stop();
  profile::reset();
}
BENCHMARK(BM_OpScopeOn)->Arg(0)->Arg(1);

void BM_CounterOn(benchmark::State& state) {
  profile::reset();
  profile::start();
  int64_t i = 0;
  for (auto _ : state) {
    profile::counter("bench_counter", static_cast<double>(i));
    if (++i % kResetEvery == 0) profile::reset();
  }
  profile::stop();
  profile::reset();
}
BENCHMARK(BM_CounterOn);

}  // namespace
}  // namespace nexus
