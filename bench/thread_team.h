// Timing helper for the physical-limit tools (nexus_membw, nexus_fmapeak): T persistent threads
// run the same job together; each pass is timed from a common start to the last thread's finish.
#pragma once

#include <barrier>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace nexus::bench {

// Runs job(thread_index) on `n_threads` threads, `passes` times; returns each pass's seconds.
// The threads are created once, so thread start-up is not timed.
inline std::vector<double> timed_passes(int n_threads, int passes,
                                        const std::function<void(int)>& job) {
  std::barrier<> start(n_threads + 1), done(n_threads + 1);
  std::vector<std::thread> team;
  for (int t = 0; t < n_threads; ++t)
    team.emplace_back([&, t] {
      for (int p = 0; p < passes; ++p) {
        start.arrive_and_wait();
        job(t);
        done.arrive_and_wait();
      }
    });
  std::vector<double> secs;
  for (int p = 0; p < passes; ++p) {
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    done.arrive_and_wait();
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (auto& th : team) th.join();
  return secs;
}

}  // namespace nexus::bench
