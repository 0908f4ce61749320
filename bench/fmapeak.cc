// nexus_fmapeak: f32 FMA peak, the ceiling of prompt processing. Each thread runs independent FMA
// chains held in registers (enough chains to cover FMA latency x ports); best of N passes.
// --isa vnni: the int8 peak instead (512-bit vpdpbusd chains, the W8A8 GEMM's instruction; an
// int8 multiply-add counts as 2 ops).
#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "harness/bench.h"
#include "thread_team.h"

namespace {

// 12 chains of 8 lanes: 4-cycle FMA latency x 2 ports needs >= 8 chains in flight.
constexpr int kChainsAvx2 = 12;
// 16 chains of 16 lanes (32 zmm registers leave room for the constants).
constexpr int kChainsAvx512 = 16;

// The chains are spelled out as separate variables: an array indexed in a loop is kept in memory
// at -O2, and the store-to-load latency would then be measured instead of the FMA units.
#define NEXUS_FMA4(F, a, b, c, d) a = F(a, m, k), b = F(b, m, k), c = F(c, m, k), d = F(d, m, k)

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  static_assert(kChainsAvx2 == 12);
  __m256 a0 = _mm256_set1_ps(0.00f), a1 = _mm256_set1_ps(0.01f), a2 = _mm256_set1_ps(0.02f);
  __m256 a3 = _mm256_set1_ps(0.03f), a4 = _mm256_set1_ps(0.04f), a5 = _mm256_set1_ps(0.05f);
  __m256 a6 = _mm256_set1_ps(0.06f), a7 = _mm256_set1_ps(0.07f), a8 = _mm256_set1_ps(0.08f);
  __m256 a9 = _mm256_set1_ps(0.09f), a10 = _mm256_set1_ps(0.10f), a11 = _mm256_set1_ps(0.11f);
  const __m256 m = _mm256_set1_ps(0.999999f), k = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i) {
    NEXUS_FMA4(_mm256_fmadd_ps, a0, a1, a2, a3);
    NEXUS_FMA4(_mm256_fmadd_ps, a4, a5, a6, a7);
    NEXUS_FMA4(_mm256_fmadd_ps, a8, a9, a10, a11);
  }
  const __m256 s =
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                    _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                  _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return std::accumulate(lanes, lanes + 8, 0.0f);
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  static_assert(kChainsAvx512 == 16);
  __m512 a0 = _mm512_set1_ps(0.00f), a1 = _mm512_set1_ps(0.01f), a2 = _mm512_set1_ps(0.02f);
  __m512 a3 = _mm512_set1_ps(0.03f), a4 = _mm512_set1_ps(0.04f), a5 = _mm512_set1_ps(0.05f);
  __m512 a6 = _mm512_set1_ps(0.06f), a7 = _mm512_set1_ps(0.07f), a8 = _mm512_set1_ps(0.08f);
  __m512 a9 = _mm512_set1_ps(0.09f), a10 = _mm512_set1_ps(0.10f), a11 = _mm512_set1_ps(0.11f);
  __m512 a12 = _mm512_set1_ps(0.12f), a13 = _mm512_set1_ps(0.13f), a14 = _mm512_set1_ps(0.14f);
  __m512 a15 = _mm512_set1_ps(0.15f);
  const __m512 m = _mm512_set1_ps(0.999999f), k = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i) {
    NEXUS_FMA4(_mm512_fmadd_ps, a0, a1, a2, a3);
    NEXUS_FMA4(_mm512_fmadd_ps, a4, a5, a6, a7);
    NEXUS_FMA4(_mm512_fmadd_ps, a8, a9, a10, a11);
    NEXUS_FMA4(_mm512_fmadd_ps, a12, a13, a14, a15);
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                                  _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return std::accumulate(lanes, lanes + 16, 0.0f);
}

#undef NEXUS_FMA4

// acc += u8 x s8 products of a and b, four per lane (inline assembly: GCC 12 copies the
// accumulators of _mm512_dpbusd_epi32 chains through the stack).
#define NEXUS_DP(acc) asm("vpdpbusd %1, %2, %0" : "+v"(acc) : "v"(a), "v"(b))

__attribute__((target("avx512f,avx512vnni"))) float dpbusd_avx512(int64_t iters) {
  static_assert(kChainsAvx512 == 16);
  __m512i c0 = _mm512_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
          c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < iters; ++i) {
    NEXUS_DP(c0);
    NEXUS_DP(c1);
    NEXUS_DP(c2);
    NEXUS_DP(c3);
    NEXUS_DP(c4);
    NEXUS_DP(c5);
    NEXUS_DP(c6);
    NEXUS_DP(c7);
    NEXUS_DP(c8);
    NEXUS_DP(c9);
    NEXUS_DP(c10);
    NEXUS_DP(c11);
    NEXUS_DP(c12);
    NEXUS_DP(c13);
    NEXUS_DP(c14);
    NEXUS_DP(c15);
  }
  const __m512i s = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                       _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)),
                       _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15))));
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  return static_cast<float>(std::accumulate(lanes, lanes + 16, int64_t{0}));
}

#undef NEXUS_DP

float fma_scalar(int64_t iters) {
  float a[kChainsAvx2];
  for (int k = 0; k < kChainsAvx2; ++k) a[k] = 0.001f * k;
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kChainsAvx2; ++k) a[k] = a[k] * 0.999999f + 1e-6f;
  return std::accumulate(a, a + kChainsAvx2, 0.0f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure f32 FMA peak throughput (GFLOP/s, an FMA counts as 2 flops)",
               "nexus_fmapeak"};
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int passes = 5;
  int64_t iters = 50000000;
  std::string isa = "auto";
  bool json = false;
  app.add_option("-t,--threads", threads, "threads")->check(CLI::PositiveNumber);
  app.add_option("-r,--passes", passes, "timed passes; the best counts")
      ->check(CLI::PositiveNumber);
  app.add_option("-i,--iters", iters, "loop iterations per thread and pass")
      ->check(CLI::PositiveNumber);
  app.add_option("--isa", isa, "auto | avx512 | avx2 | scalar | vnni (int8 vpdpbusd)")
      ->check(CLI::IsMember({"auto", "avx512", "avx2", "scalar", "vnni"}));
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  const bool has512 = __builtin_cpu_supports("avx512f");
  const bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == "auto") isa = has512 ? "avx512" : has2 ? "avx2" : "scalar";
  const bool has_vnni = has512 && __builtin_cpu_supports("avx512vnni");
  if ((isa == "avx512" && !has512) || (isa == "avx2" && !has2) || (isa == "vnni" && !has_vnni)) {
    std::fprintf(stderr, "nexus_fmapeak: error: this CPU does not support %s\n", isa.c_str());
    return 1;
  }
  // Flops per iteration: chains x lanes x 2.
  const double flops_per_iter = isa == "vnni"     ? kChainsAvx512 * 64 * 2.0
                                : isa == "avx512" ? kChainsAvx512 * 16 * 2.0
                                : isa == "avx2"   ? kChainsAvx2 * 8 * 2.0
                                                  : kChainsAvx2 * 2.0;
  std::vector<float> sink(threads);
  const std::vector<double> secs = nexus::bench::timed_passes(threads, passes, [&](int t) {
    sink[t] += isa == "vnni"     ? dpbusd_avx512(iters)
               : isa == "avx512" ? fma_avx512(iters)
               : isa == "avx2"   ? fma_avx2(iters)
                                 : fma_scalar(iters);
  });
  const double flops = flops_per_iter * static_cast<double>(iters) * threads;
  std::vector<double> gflops;
  for (double s : secs) gflops.push_back(flops / s / 1e9);
  const double best = *std::max_element(gflops.begin(), gflops.end());
  const double mean = std::accumulate(gflops.begin(), gflops.end(), 0.0) / gflops.size();
  if (json) {
    nlohmann::ordered_json j;
    j["tool"] = "fmapeak";
    j["cpu_info"] = nexus::cpu_model_name();
    j["isa"] = isa;
    j["n_threads"] = threads;
    j["iters"] = iters;
    j["passes"] = passes;
    j["best_gflops"] = best;
    j["mean_gflops"] = mean;
    j["best_gflops_per_thread"] = best / threads;
    j["samples_gflops"] = gflops;
    j["checksum"] = std::accumulate(sink.begin(), sink.end(), 0.0);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s peak: %.1f %s best (%.1f per thread), %.1f mean (%d threads, %s, %d passes)\n",
                isa == "vnni" ? "int8 dot" : "f32 FMA", best, isa == "vnni" ? "GOP/s" : "GFLOP/s",
                best / threads, mean, threads, isa.c_str(), passes);
  }
  return 0;
}
