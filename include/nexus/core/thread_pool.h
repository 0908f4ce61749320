// Fixed pool of worker threads for data-parallel loops, tuned for many short parallel regions
// (a decode step has dozens). Work is cut into chunks that the caller and the workers claim from
// a shared counter: a worker that is slow to wake (a busy machine) simply claims nothing, and the
// caller never waits for a thread that has not started, only for chunks already being computed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace nexus {

class ThreadPool {
 public:
  // n_threads >= 1 (total, including the caller).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(i, n_threads) once for every partition i in [0, n_threads) and waits for all of
  // them. Partitions run concurrently on any of the pool's threads (never two at once with the
  // same i), so per-partition scratch indexed by i is safe. Exceptions thrown by partitions run
  // on the calling thread propagate; partitions must not throw on workers.
  void run(const std::function<void(int, int)>& fn);
  // Calls fn(begin, end) over [0, n) cut into contiguous chunks claimed dynamically (a few per
  // thread); runs inline when n < 2 * min_per_thread (too little work to wake the workers).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_per_thread = 1);
  // Runs chunk(i) for i in [0, n_chunks), claimed in order by the caller and the workers as each
  // becomes free; returns when every chunk has finished. n_chunks < 2^20.
  void run_chunks(int64_t n_chunks, const std::function<void(int64_t)>& chunk);
  // Calls fn(begin, end) over [0, n) for streaming work: each thread starts on its own contiguous
  // share and walks it front to back in pieces of `step`, so it reads one unbroken stream; a
  // thread that runs out takes the upper half of the largest share still unclaimed and walks that.
  // Runs fn(0, n) inline on one thread or when n <= step. n < 2^32.
  void steal_for(int64_t n, int64_t step, const std::function<void(int64_t, int64_t)>& fn);

  // Memory worker `thread` (1 .. size() - 1) should pull into its cache while it waits for the
  // next region: [p, p + bytes) from the front, a few lines per spin, until the next region
  // starts (a decode step passes the start of the worker's share of the next matmul, so that its
  // stream is already running when that matmul begins; the serial work between regions leaves
  // the memory idle otherwise). Replaces the rest of the worker's previous range; a range given
  // while the worker sleeps is issued, if at all, at its next wait. Prefetches never fault, so a
  // range that is no longer mapped is harmless. Ignored for thread 0 (the caller) and
  // out-of-range threads.
  void prefetch_while_idle(int thread, const void* p, size_t bytes);
  // Bytes the workers have prefetched this way since the pool was made (counted in steps of
  // kIdlePrefetchStep).
  uint64_t idle_prefetched_bytes() const {
    return idle_prefetched_.load(std::memory_order_relaxed);
  }
  static constexpr size_t kIdlePrefetchStep = 256;

 private:
  // Claims and runs chunks of generation `gen` until none are left or the generation moved on.
  void work_on(uint32_t gen);
  void worker(int index);

  // One share of steal_for: (next unclaimed << 32) | end, on its own cache line.
  struct alignas(128) Share {
    std::atomic<uint64_t> v{0};
  };

  int n_threads_;
  std::unique_ptr<Share[]> shares_;
  // One worker's idle prefetch range: published by bumping seq after storing p and n.
  struct alignas(128) IdleRange {
    std::atomic<const char*> p{nullptr};
    std::atomic<size_t> n{0};
    std::atomic<uint64_t> seq{0};
  };
  std::unique_ptr<IdleRange[]> idle_ranges_;
  // Own line: workers add to it while the caller touches the claim word.
  alignas(128) std::atomic<uint64_t> idle_prefetched_{0};
  std::vector<std::thread> workers_;
  // The current job. Written by the caller before the generation is published; a worker reads it
  // only after claiming a chunk of that generation (which keeps the job alive).
  const std::function<void(int64_t)>* job_ = nullptr;
  // (generation mod 2^24 << 40) | (chunk count << 20) | next unclaimed chunk (thread_pool.cc).
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};  // finished chunks of the current generation
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace nexus
