// Thread pool: chunks claimed with a compare-and-swap on one word (generation, chunk count, next
// chunk). Idle workers spin briefly on the generation before sleeping on a condition variable; the
// caller wakes sleepers only when some are asleep. steal_for runs one chunk per thread over
// per-thread shares (next, end) that their owners advance and idle threads split, each a
// compare-and-swap. A spinning worker with an idle prefetch range issues its prefetches instead
// of pausing.
#include "nexus/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "nexus/status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEXUS_CPU_RELAX() _mm_pause()
#define NEXUS_PREFETCH(p) _mm_prefetch(p, _MM_HINT_T0)
#else
#define NEXUS_CPU_RELAX() std::this_thread::yield()
#define NEXUS_PREFETCH(p) __builtin_prefetch(p, 0, 3)
#endif

namespace nexus {
namespace {

// How long an idle worker spins before sleeping: long enough to bridge the serial work between
// the parallel regions of a decode step, short enough not to burn a core between requests.
constexpr auto kSpinTime = std::chrono::microseconds(300);
// Chunks per thread in parallel_for: enough to even out a late or slower thread.
constexpr int64_t kChunksPerThread = 4;

// The claim word: (generation << 40) | (chunk count << 20) | next unclaimed chunk. It carries the
// count so that a worker deciding on a word it read before its region ended never compares that
// word's next chunk with the count of the region after it (the count was a separate field: a
// worker preempted between reading the word and claiming, while its region finished and the next
// one was being set up, claimed a chunk that did not exist in its region against the larger count
// of the next one; the caller's done count then ran ahead of its chunks, and it returned with one
// still running). A claim is a compare-and-swap of the whole word, so it succeeds only while the
// word it read is current, and then next < count proves the chunk is in the live region.
constexpr int kChunkBits = 20;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr uint64_t pack_claim(uint64_t gen, uint64_t count) {
  return ((gen & 0xffffffu) << (2 * kChunkBits)) | (count << kChunkBits);
}
constexpr uint32_t claim_gen(uint64_t c) { return static_cast<uint32_t>(c >> (2 * kChunkBits)); }
constexpr int64_t claim_count(uint64_t c) {
  return static_cast<int64_t>((c >> kChunkBits) & kChunkMask);
}
constexpr int64_t claim_next(uint64_t c) { return static_cast<int64_t>(c & kChunkMask); }

// steal_for's share word: (next unclaimed unit << 32) | end.
constexpr uint64_t pack_share(uint64_t next, uint64_t end) { return (next << 32) | end; }
constexpr uint64_t share_next(uint64_t v) { return v >> 32; }
constexpr uint64_t share_end(uint64_t v) { return v & 0xffffffffu; }
constexpr uint64_t share_left(uint64_t v) {
  return share_end(v) > share_next(v) ? share_end(v) - share_next(v) : 0;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      shares_(new Share[static_cast<size_t>(n_threads_)]),
      idle_ranges_(new IdleRange[static_cast<size_t>(n_threads_)]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on(uint32_t gen) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (claim_gen(c) != (gen & 0xffffffu)) return;  // a later job: not ours to touch
    const int64_t idx = claim_next(c);
    if (idx >= claim_count(c)) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    (*job_)(idx);  // the claimed chunk keeps the caller waiting, so job_ is alive
    done_.fetch_add(1, std::memory_order_acq_rel);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::prefetch_while_idle(int thread, const void* p, size_t bytes) {
  if (thread < 1 || thread >= n_threads_) return;
  IdleRange& r = idle_ranges_[thread];
  r.p.store(static_cast<const char*>(p), std::memory_order_relaxed);
  r.n.store(bytes, std::memory_order_relaxed);
  r.seq.fetch_add(1, std::memory_order_release);
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  IdleRange& range = idle_ranges_[index];
  uint64_t range_seen = 0;
  const char* pf = nullptr;  // the idle prefetch range still to issue: [pf, pf_end)
  const char* pf_end = nullptr;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto t0 = std::chrono::steady_clock::now();
      int spins = 0;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        if (stop_.load(std::memory_order_relaxed)) return;
        // A new range replaces the rest of the old one. A range published while p and n are
        // being replaced again is only a wrong hint: prefetches neither fault nor write.
        if (const uint64_t rs = range.seq.load(std::memory_order_acquire); rs != range_seen) {
          range_seen = rs;
          pf = range.p.load(std::memory_order_relaxed);
          pf_end = pf == nullptr ? nullptr : pf + range.n.load(std::memory_order_relaxed);
        }
        if (pf < pf_end) {
          for (size_t off = 0; off < kIdlePrefetchStep; off += 64) NEXUS_PREFETCH(pf + off);
          pf += kIdlePrefetchStep;
          idle_prefetched_.fetch_add(kIdlePrefetchStep, std::memory_order_relaxed);
          continue;
        }
        NEXUS_CPU_RELAX();
        if (++spins % 64 == 0) std::this_thread::yield();
        if (spins % 256 == 0 && std::chrono::steady_clock::now() - t0 > kSpinTime) {
          std::unique_lock<std::mutex> lock(mu_);
          sleepers_.fetch_add(1);
          cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
          sleepers_.fetch_sub(1);
          if (stop_.load()) return;
        }
      }
    }
    seen = g;
    work_on(g);
  }
}

void ThreadPool::run_chunks(int64_t n_chunks, const std::function<void(int64_t)>& chunk) {
  if (n_chunks <= 0) return;
  if (n_threads_ == 1 || n_chunks == 1) {
    for (int64_t i = 0; i < n_chunks; ++i) chunk(i);
    return;
  }
  NEXUS_CHECK(static_cast<uint64_t>(n_chunks) <= kChunkMask,
              "[thread pool] run_chunks over " + std::to_string(n_chunks) + " chunks: at most " +
                  std::to_string(kChunkMask));
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_ = &chunk;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(pack_claim(gen, static_cast<uint64_t>(n_chunks)), std::memory_order_release);
  generation_.store(gen);  // seq_cst: ordered before the sleepers_ check below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  std::exception_ptr err;
  try {
    work_on(gen);
  } catch (...) {
    err = std::current_exception();
    // Count the chunk that threw as done and claim the rest so the wait below ends.
    done_.fetch_add(1, std::memory_order_acq_rel);
    for (uint64_t c = claim_.load(); claim_next(c) < n_chunks;) {
      if (claim_.compare_exchange_weak(c, c + 1)) done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  for (int spins = 0; done_.load(std::memory_order_acquire) < n_chunks; ++spins) {
    NEXUS_CPU_RELAX();
    if (spins % 64 == 63) std::this_thread::yield();
  }
  job_ = nullptr;
  if (err) std::rethrow_exception(err);
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  const int nt = n_threads_;
  run_chunks(nt, [&](int64_t i) { fn(static_cast<int>(i), nt); });
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_per_thread) {
  if (n <= 0) return;
  const int64_t min_chunk = std::max<int64_t>(1, min_per_thread);
  if (n_threads_ == 1 || n < 2 * min_chunk) {
    fn(0, n);
    return;
  }
  const int64_t n_chunks =
      std::max<int64_t>(1, std::min<int64_t>(n_threads_ * kChunksPerThread, n / min_chunk));
  const int64_t size = (n + n_chunks - 1) / n_chunks;
  run_chunks((n + size - 1) / size, [&](int64_t i) {
    const int64_t b = i * size;
    fn(b, std::min(n, b + size));
  });
}

void ThreadPool::steal_for(int64_t n, int64_t step,
                           const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  NEXUS_CHECK(n < (int64_t{1} << 32),
              "[thread pool] steal_for over " + std::to_string(n) + " units: at most 2^32 - 1");
  step = std::max<int64_t>(1, step);
  if (n_threads_ == 1 || n <= step) {
    fn(0, n);
    return;
  }
  const int nt = n_threads_;
  for (int i = 0; i < nt; ++i)
    shares_[i].v.store(
        pack_share(static_cast<uint64_t>(n * i / nt), static_cast<uint64_t>(n * (i + 1) / nt)),
        std::memory_order_relaxed);
  const auto ustep = static_cast<uint64_t>(step);
  run_chunks(nt, [&](int64_t c) {
    std::atomic<uint64_t>& mine = shares_[c].v;
    for (;;) {
      // Claim the next piece of our own share.
      uint64_t v = mine.load(std::memory_order_relaxed);
      if (share_left(v) > 0) {
        const uint64_t b = share_next(v), e = std::min(share_end(v), b + ustep);
        if (!mine.compare_exchange_weak(v, pack_share(e, share_end(v)), std::memory_order_relaxed))
          continue;
        fn(static_cast<int64_t>(b), static_cast<int64_t>(e));
        continue;
      }
      // Ours is used up: split the largest unclaimed remainder (more than one piece) and keep
      // its upper half. Nobody steals from an empty share, so storing the half into ours is safe.
      bool stole = false;
      while (!stole) {
        int victim = -1;
        uint64_t seen = 0;
        for (int i = 0; i < nt; ++i) {
          const uint64_t w = shares_[i].v.load(std::memory_order_relaxed);
          if (i != c && share_left(w) > ustep && share_left(w) > share_left(seen))
            victim = i, seen = w;
        }
        if (victim < 0) return;
        const uint64_t b = share_next(seen), e = share_end(seen), mid = b + (e - b + 1) / 2;
        if (shares_[victim].v.compare_exchange_strong(seen, pack_share(b, mid),
                                                      std::memory_order_relaxed)) {
          mine.store(pack_share(mid, e), std::memory_order_relaxed);
          stole = true;
        }
      }
    }
  });
}

}  // namespace nexus
