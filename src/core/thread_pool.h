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
