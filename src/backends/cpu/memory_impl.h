// What the long-term memory kernels share (memory.cc, titans.cc): the split of the work into
// (sequence, key/value head) pairs, each run on one thread of the pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "nexus/core/thread_pool.h"

namespace nexus::cpu {

// fn(sequence, head) for every pair of b sequences and kv heads.
template <class Fn>
void for_each_memory_head(int64_t b, int64_t kv, ThreadPool* pool, Fn fn) {
  const int64_t n = b * kv;
  if (pool != nullptr && n > 1)
    pool->parallel_for(
        n,
        [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) fn(i / kv, i % kv);
        },
        1);
  else
    for (int64_t i = 0; i < n; ++i) fn(i / kv, i % kv);
}

// v holds exactly n floats (zeros when `zero`); keeps its capacity, so a per-thread buffer is
// allocated once.
inline void sized(std::vector<float>& v, int64_t n, bool zero = false) {
  v.resize(static_cast<size_t>(n));
  if (zero) std::fill(v.begin(), v.end(), 0.0f);
}

}  // namespace nexus::cpu
