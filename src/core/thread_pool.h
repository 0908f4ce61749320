// Fixed pool of worker threads for data-parallel loops, tuned for many short parallel regions
// (a decode step has dozens): workers spin briefly on an atomic generation counter before
// sleeping, and the caller works too, so a pool of N uses N threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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
  // Calls fn(thread_index, n_threads) on every thread and waits for all to return. Exceptions
  // thrown on the calling thread propagate; workers must not throw.
  void run(const std::function<void(int, int)>& fn);
  // Calls fn(begin, end) over [0, n) split into contiguous chunks, one per thread; runs inline
  // when n < 2 * min_per_thread (too little work to be worth waking the workers).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_per_thread = 1);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace nexus
