// nexus_membw: memory read bandwidth, the ceiling of token generation. T threads each sum their
// slice of one large buffer (AVX2 loads, 4 independent accumulators); the best of N passes counts.
#include <immintrin.h>
#include <sys/mman.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "harness/bench.h"
#include "thread_team.h"

namespace {

// Sum of the 64-bit words of [p, p + n); n is a multiple of 128 and p is 64-byte aligned.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t sum_scalar(const uint8_t* p, size_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n / 8; i += 4) s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
  return s0 + s1 + s2 + s3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure memory read bandwidth (GB/s = 1e9 bytes/s)", "nexus_membw"};
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int size_mib = 1024, passes = 5;
  bool json = false, scalar = false;
  app.add_option("-t,--threads", threads, "reading threads")->check(CLI::PositiveNumber);
  app.add_option("-s,--size-mib", size_mib, "buffer size in MiB (default 1024)")
      ->check(CLI::PositiveNumber);
  app.add_option("-r,--passes", passes, "timed passes; the best counts")
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--scalar", scalar, "use 64-bit scalar loads instead of AVX2");
  CLI11_PARSE(app, argc, argv);

  const bool avx2 = !scalar && __builtin_cpu_supports("avx2");
  // Each thread reads an equal slice, a multiple of 128 bytes, 64-byte aligned.
  const size_t total = static_cast<size_t>(size_mib) << 20;
  const size_t slice = total / threads / 128 * 128;
  if (slice == 0) {
    std::fprintf(stderr, "nexus_membw: error: buffer too small for %d threads\n", threads);
    return 1;
  }
  // 2 MiB aligned and advised for transparent huge pages, like the weights nexus decodes from
  // (models/weight_repack.cc): with 4 KiB pages the page walks would be measured too.
  constexpr size_t kHuge = 2u << 20;
  const size_t bytes_alloc = (slice * threads + kHuge - 1) / kHuge * kHuge;
  uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(kHuge, bytes_alloc));
  if (buf == nullptr) {
    std::fprintf(stderr, "nexus_membw: error: cannot allocate %d MiB\n", size_mib);
    return 1;
  }
  madvise(buf, bytes_alloc, MADV_HUGEPAGE);
  std::vector<uint64_t> sums(threads);
  // First touch by the thread that reads the slice (NUMA-local pages), then the timed passes.
  nexus::bench::timed_passes(threads, 1,
                             [&](int t) { std::memset(buf + t * slice, t + 1, slice); });
  const std::vector<double> secs = nexus::bench::timed_passes(threads, passes, [&](int t) {
    const uint8_t* p = buf + t * slice;
    sums[t] += avx2 ? sum_avx2(p, slice) : sum_scalar(p, slice);
  });
  std::free(buf);

  const double bytes = static_cast<double>(slice) * threads;
  std::vector<double> gbps;
  for (double s : secs) gbps.push_back(bytes / s / 1e9);
  const double best = *std::max_element(gbps.begin(), gbps.end());
  const double mean = std::accumulate(gbps.begin(), gbps.end(), 0.0) / gbps.size();
  const uint64_t checksum = std::accumulate(sums.begin(), sums.end(), uint64_t{0});
  if (json) {
    nlohmann::ordered_json j;
    j["tool"] = "membw";
    j["cpu_info"] = nexus::cpu_model_name();
    j["isa"] = avx2 ? "avx2" : "scalar";
    j["n_threads"] = threads;
    j["bytes"] = static_cast<uint64_t>(bytes);
    j["passes"] = passes;
    j["best_gbps"] = best;
    j["mean_gbps"] = mean;
    j["samples_gbps"] = gbps;
    j["checksum"] = checksum;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "read bandwidth: %.2f GB/s best, %.2f GB/s mean (%d threads, %s, %.0f MiB, %d "
        "passes)\n",
        best, mean, threads, avx2 ? "avx2" : "scalar", bytes / 1048576.0, passes);
  }
  return 0;
}
