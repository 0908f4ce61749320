// Waiting on a ThreadPool's idle prefetch count, shared by the pool's and matmul_group's tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "nexus/core/thread_pool.h"

namespace nexus::test {

// Wakes the pool's workers with a small region, calls `hint` (which gives them idle prefetch
// ranges) and returns how far pool.idle_prefetched_bytes() moved: it waits up to two seconds for
// `want`, then a little longer for any excess. A worker takes a range only while it spins between
// regions, so an attempt that sees no movement at all (the worker had gone to sleep) is repeated;
// 0 after fifty such attempts.
inline uint64_t idle_prefetch_moved(ThreadPool& pool, const std::function<void()>& hint,
                                    uint64_t want) {
  using namespace std::chrono_literals;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const uint64_t start = pool.idle_prefetched_bytes();
    pool.run_chunks(2, [](int64_t) {});
    hint();
    auto t0 = std::chrono::steady_clock::now();
    while (pool.idle_prefetched_bytes() == start && std::chrono::steady_clock::now() - t0 < 50ms)
      std::this_thread::yield();
    if (pool.idle_prefetched_bytes() == start) continue;
    t0 = std::chrono::steady_clock::now();
    while (pool.idle_prefetched_bytes() - start < want &&
           std::chrono::steady_clock::now() - t0 < 2s)
      std::this_thread::yield();
    std::this_thread::sleep_for(20ms);
    return pool.idle_prefetched_bytes() - start;
  }
  return 0;
}

}  // namespace nexus::test
