// Timing helper for the physical-limit tools (nexus_membw, nexus_fmapeak): T persistent threads
// run the same job together; each pass is timed from a common start to the last thread's finish.
#pragma once

#include <algorithm>
#include <barrier>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace nexus::bench {

// Runs job(thread_index) on `n_threads` threads, `passes` times; returns each pass's seconds.
// The threads are created once, so thread start-up is not timed. Each thread reads the clock
// itself just before and after its job, and a pass lasts from the earliest start to the latest
// finish: with more threads than cores, a coordinating thread that read the clock after the
// start barrier could be scheduled only once the team was nearly done (small buffers then
// measured several times the machine's bandwidth).
inline std::vector<double> timed_passes(int n_threads, int passes,
                                        const std::function<void(int)>& job) {
  using Clock = std::chrono::steady_clock;
  std::barrier<> start(n_threads + 1), done(n_threads + 1);
  std::vector<Clock::time_point> begin(n_threads), end(n_threads);
  std::vector<std::thread> team;
  for (int t = 0; t < n_threads; ++t)
    team.emplace_back([&, t] {
      for (int p = 0; p < passes; ++p) {
        start.arrive_and_wait();
        begin[t] = Clock::now();
        job(t);
        end[t] = Clock::now();
        done.arrive_and_wait();
      }
    });
  std::vector<double> secs;
  for (int p = 0; p < passes; ++p) {
    start.arrive_and_wait();
    done.arrive_and_wait();  // orders the team's clock readings before the reads below
    const auto first = *std::min_element(begin.begin(), begin.end());
    const auto last = *std::max_element(end.begin(), end.end());
    secs.push_back(std::chrono::duration<double>(last - first).count());
  }
  for (auto& th : team) th.join();
  return secs;
}

}  // namespace nexus::bench
