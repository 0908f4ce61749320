// The communicator's cost on this machine, for the α-β scaling model (docs/DISTRIBUTED.md): under
// `mpirun -np N`, the time of an f32 all-reduce, reduce-scatter and all-gather of each size
// (median of --reps after a warm-up, averaged over ranks) and the all-reduce's bus bandwidth
// 2 (N - 1) / N * bytes / (t - α), with α the latency of the smallest all-reduce. Each repetition
// takes the next buffer of a --footprint-mb array, as training's buckets do (the same buffer again
// and again stays in cache: 4 MiB ran 10x faster).
// Usage: mpirun -np 2 build/nexus_allreduce [--max-mb 64] [--reps 9]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <vector>

#include "nexus/dist/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double median_seconds(nexus::dist::Communicator& comm, int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up: buffers touched, connections made
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // Every rank reports the slowest rank's time.
  std::sort(t.begin(), t.end());
  double m = t[t.size() / 2];
  std::vector<double> all{m};
  comm.all_reduce_sum(all);  // mean over ranks of the medians
  return all[0] / comm.size();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"f32 collectives of the communicator, timed (run under mpirun)"};
  double max_mb = 64;
  int reps = 9;
  app.add_option("--max-mb", max_mb, "largest buffer, MiB")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions per size")->capture_default_str();
  double footprint_mb = 512;
  app.add_option("--footprint-mb", footprint_mb, "memory the buffers rotate through, MiB")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto made = nexus::dist::make_communicator();
  if (!made) {
    std::fprintf(stderr, "nexus_allreduce: %s\n", made.status().message().c_str());
    return 1;
  }
  auto& comm = *made.value();
  const int n = comm.size();
  if (comm.rank() == 0)
    std::printf("%d ranks (%s, %s)\n%10s %14s %14s %14s %12s\n", n, comm.name(),
                comm.transport().c_str(), "bytes", "all-reduce s", "red-scatter s", "all-gather s",
                "bus GB/s");
  // Latency: the 4 KiB all-reduce, its fastest median of three rounds.
  double alpha = 1e9;
  for (int round = 0; round < 3; ++round) {
    std::vector<float> small(1024 / n * n, 1.0f);
    alpha = std::min(alpha, median_seconds(comm, reps, [&] { comm.all_reduce_sum(small); }));
  }
  for (size_t bytes = 4096; bytes <= static_cast<size_t>(max_mb * (1 << 20)); bytes *= 4) {
    const size_t floats = bytes / 4 / n * n;
    const size_t slots =
        std::max<size_t>(1, static_cast<size_t>(footprint_mb * (1 << 20)) / (floats * 4));
    std::vector<float> mem(floats * slots, 1.0f), out(floats / n);
    size_t next = 0;
    auto buf = [&] {
      next = (next + 1) % slots;
      return std::span<float>(mem.data() + next * floats, floats);
    };
    std::vector<size_t> counts(n, floats / n);
    const double ar = median_seconds(comm, reps, [&] { comm.all_reduce_sum(buf()); });
    const double rs =
        median_seconds(comm, reps, [&] { comm.reduce_scatter_sum(buf(), out, counts); });
    const double ag = median_seconds(comm, reps, [&] { comm.all_gather(buf(), counts); });
    const bool first = bytes == 4096;
    const double bus =
        2.0 * (n - 1) / n * static_cast<double>(floats * 4) / std::max(ar - alpha, 1e-9) / 1e9;
    if (comm.rank() == 0) {
      std::printf("%10zu %14.6f %14.6f %14.6f ", floats * 4, ar, rs, ag);
      if (first)
        std::printf("%12s\n", "-");
      else
        std::printf("%12.2f\n", bus);
    }
  }
  if (comm.rank() == 0) std::printf("latency alpha (4 KiB all-reduce): %.1f us\n", alpha * 1e6);
  return 0;
}
