// How CPU kernels split work over a ThreadPool so that results never depend on the thread count:
// contiguous items, dynamically claimed ranges, ranges aligned to SIMD steps, and a fixed-order
// double sum for row reductions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nexus/core/thread_pool.h"

namespace nexus::cpu::par {

// Calls fn(item, thread) for item in [0, n), split into contiguous chunks over the pool's threads.
template <typename Fn>
inline void for_items(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (!pool || pool->size() == 1 || n < 2) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  pool->run([&](int thread, int n_threads) {
    const int64_t chunk = (n + n_threads - 1) / n_threads;
    const int64_t end = std::min(n, (thread + 1) * chunk);
    for (int64_t i = thread * chunk; i < end; ++i) fn(i, thread);
  });
}

// Calls fn(begin, end) over [0, n) in chunks claimed dynamically by the pool's threads (inline
// without a pool). For loops whose items are independent, so the split never changes a result.
template <typename Fn>
inline void for_ranges(ThreadPool* pool, int64_t n, int64_t min_per_thread, const Fn& fn) {
  if (!pool || pool->size() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, fn, min_per_thread);
}

// for_ranges over elements whose chunks start and end on multiples of kLaneAlign (but the last
// end, n): the element-wise kernels run a SIMD body and a scalar tail whose exp differs in the
// last bit, so a chunk edge inside a vector changed elements with the thread count (SwiGLU and
// GELU at 3 threads; TrainOpsGrad.ElementwiseOpsThreadedAreBitIdentical). 64 covers every
// body's step (8 or 16 lanes, unrolled).
constexpr int64_t kLaneAlign = 64;
template <typename Fn>
inline void for_aligned(ThreadPool* pool, int64_t n, int64_t min_per_thread, const Fn& fn) {
  const int64_t units = (n + kLaneAlign - 1) / kLaneAlign;
  for_ranges(pool, units, std::max<int64_t>(1, min_per_thread / kLaneAlign),
             [&](int64_t u0, int64_t u1) { fn(u0 * kLaneAlign, std::min(n, u1 * kLaneAlign)); });
}

// Sum of term(j) for j in [0, n) in double, as four partial sums (j mod 4) added at the end: the
// norms' row reductions were one chain of dependent double adds, bound by the add's latency. The
// order is fixed, so a result does not depend on the thread count.
template <typename Term>
inline double sum4(int64_t n, const Term& term) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += term(j);
    s1 += term(j + 1);
    s2 += term(j + 2);
    s3 += term(j + 3);
  }
  for (; j < n; ++j) s0 += term(j);
  return (s0 + s1) + (s2 + s3);
}

}  // namespace nexus::cpu::par
