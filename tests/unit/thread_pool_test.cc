// ThreadPool: every index or unit is handed out exactly once, whichever thread takes it, for
// parallel_for, run_chunks and steal_for (whose shares are split while threads walk them); a slow
// thread's share is taken over by the others.
#include "nexus/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_idle_prefetch.h"

namespace nexus {
namespace {

// Counts how often each unit of [0, n) was passed to fn by steal_for.
std::vector<int> steal_counts(ThreadPool& pool, int64_t n, int64_t step,
                              const std::function<void(int64_t, int64_t)>& extra = nullptr) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.steal_for(n, step, [&](int64_t b, int64_t e) {
    EXPECT_LT(b, e);
    // One thread runs everything in one call; otherwise pieces are at most a step.
    if (pool.size() > 1) {
      EXPECT_LE(e - b, step);
    }
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    if (extra) extra(b, e);
  });
  std::vector<int> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = hits[static_cast<size_t>(i)];
  return out;
}

TEST(ThreadPool, StealForCoversEveryUnitOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000, 4097}) {
      for (int64_t step : {1, 3, 16, 5000}) {
        const std::vector<int> hits = steal_counts(pool, n, step);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)], 1)
              << "unit " << i << " of " << n << ", step " << step << ", " << threads << " threads";
      }
    }
  }
}

// One thread is made slow: the others must take over most of its share (by stealing), and still
// no unit runs twice.
TEST(ThreadPool, StealForRebalancesASlowThread) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> by_caller{0}, by_worker{0}, caller_before_worker{-1};
  const int64_t n = 400;
  const std::vector<int> hits = steal_counts(pool, n, 4, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() == caller) {
      by_caller += e - b;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the slow one
    } else {
      int64_t unset = -1;
      caller_before_worker.compare_exchange_strong(unset, by_caller.load());
      by_worker += e - b;
    }
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "unit " << i;
  EXPECT_EQ(by_caller + by_worker, n);
  // Without stealing each thread would run exactly its own n / 2 units. A worker that started
  // while the caller was still on its own share (not asleep through it on a loaded machine) must
  // also have taken part of the slow caller's share.
  if (caller_before_worker >= 0 && caller_before_worker < n / 4) {
    EXPECT_GT(by_worker, n / 2) << "caller ran " << by_caller << ", " << caller_before_worker
                                << " before the worker started";
  }
}

TEST(ThreadPool, StealForRunsInlineForOnePiece) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.steal_for(10, 10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  pool.steal_for(0, 4, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, StealForAndRunChunksRejectTooManyUnits) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.steal_for(int64_t{1} << 32, 1024, [](int64_t, int64_t) {}), std::exception);
  // run_chunks' count lives in 20 bits of the claim word.
  int calls = 0;
  EXPECT_THROW(pool.run_chunks(int64_t{1} << 20, [&](int64_t) { ++calls; }), std::exception);
  EXPECT_EQ(calls, 0);
  std::atomic<int64_t> ran{0};
  pool.run_chunks((int64_t{1} << 20) - 1, [&](int64_t) { ran++; });
  EXPECT_EQ(ran.load(), (int64_t{1} << 20) - 1);
}

TEST(ThreadPool, ParallelForAndRunChunksCoverEveryIndexOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 333}) {
      std::vector<std::atomic<int>> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) a[static_cast<size_t>(i)]++;
      });
      pool.run_chunks(n, [&](int64_t i) { b[static_cast<size_t>(i)]++; });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(a[static_cast<size_t>(i)], 1) << i;
        ASSERT_EQ(b[static_cast<size_t>(i)], 1) << i;
      }
    }
  }
}

// Back-to-back regions of alternating sizes on more threads than this machine has cores, so
// workers are preempted mid-claim: a worker that read the claim word of a finished region must not
// claim a chunk in the next one against its chunk count (it once did: the next region's chunk ran
// twice, or the old region's freed job was called, and the caller returned while a chunk still
// ran; TrainOpsGrad.RowOpsThreadedAreBitIdentical crashed under a loaded ctest).
TEST(ThreadPool, BackToBackRegionsOfAlternatingSizesRunEachChunkOnce) {
  ThreadPool pool(6);
  for (int r = 0; r < 20000; ++r) {
    const int64_t n = r % 2 ? 24 : 3;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> running{0};
    pool.run_chunks(n, [&](int64_t i) {
      running++;
      hits[static_cast<size_t>(i)]++;
      running--;
    });
    ASSERT_EQ(running.load(), 0) << "region " << r << " returned while a chunk ran";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "region " << r << ", chunk " << i;
  }
}

// Many back-to-back steal_for calls (decode runs hundreds a token) reuse the shares safely.
TEST(ThreadPool, StealForBackToBack) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int r = 0; r < 2000; ++r)
    pool.steal_for(37, 2, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total, 2000 * 37);
}

// How far worker `thread`'s idle prefetch of [p, p + bytes) moves the pool's count.
uint64_t idle_prefetch_of(ThreadPool& pool, int thread, const void* p, size_t bytes,
                          uint64_t want) {
  return test::idle_prefetch_moved(
      pool, [&] { pool.prefetch_while_idle(thread, p, bytes); }, want);
}

// A worker waiting between regions prefetches the range it was given, from the front, in steps
// of kIdlePrefetchStep, and once only.
TEST(ThreadPool, IdlePrefetchIssuesTheGivenRangeOnce) {
  std::vector<char> buf(8192);
  ThreadPool pool(2);
  EXPECT_EQ(idle_prefetch_of(pool, 1, buf.data(), 1000, 1024), 1024u);
  EXPECT_EQ(idle_prefetch_of(pool, 1, buf.data(), buf.size(), buf.size()), buf.size());
  ThreadPool three(3);
  EXPECT_EQ(idle_prefetch_of(three, 2, buf.data(), 4096, 4096), 4096u);
}

// The caller has no idle time to spend (thread 0) and unknown threads are ignored; without a
// range the workers prefetch nothing.
TEST(ThreadPool, IdlePrefetchIgnoresTheCallerAndUnknownThreads) {
  std::vector<char> buf(4096);
  ThreadPool pool(2);
  for (int r = 0; r < 100; ++r) pool.run_chunks(4, [](int64_t) {});
  pool.prefetch_while_idle(0, buf.data(), buf.size());
  pool.prefetch_while_idle(2, buf.data(), buf.size());
  pool.prefetch_while_idle(-1, buf.data(), buf.size());
  ThreadPool one(1);
  one.prefetch_while_idle(1, buf.data(), buf.size());
  for (int r = 0; r < 100; ++r) pool.run_chunks(4, [](int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pool.idle_prefetched_bytes(), 0u);
  EXPECT_EQ(one.idle_prefetched_bytes(), 0u);
}

}  // namespace
}  // namespace nexus
