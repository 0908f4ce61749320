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

namespace nexus::cpu {

// Slot reduction: out[a] = sum_x proj[x][a] f[x] for a < slots, with proj this head's
// [head_dim][slots]; returns out, or f itself when there is no projection.
inline const float* project_slots(const float* proj, int64_t slots, int64_t g, const float* f,
                                  int64_t d, float* out) {
  if (proj == nullptr) return f;
  const float* p = proj + g * d * slots;
  std::fill(out, out + slots, 0.0f);
  for (int64_t x = 0; x < d; ++x)
    for (int64_t a = 0; a < slots; ++a) out[a] += p[x * slots + a] * f[x];
  return out;
}

}  // namespace nexus::cpu
