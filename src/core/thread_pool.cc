// Thread pool: spin-then-sleep workers. The caller publishes a job by bumping an atomic
// generation; workers spinning see it within ~100 ns, sleeping ones are woken through the
// condition variable only when some are actually asleep.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEXUS_CPU_RELAX() _mm_pause()
#else
#define NEXUS_CPU_RELAX() std::this_thread::yield()
#endif

namespace nexus {
namespace {

// How long an idle worker spins before sleeping: long enough to bridge the serial work between
// the parallel regions of a decode step, short enough not to burn a core between requests.
constexpr auto kSpinTime = std::chrono::microseconds(300);

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
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

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto t0 = std::chrono::steady_clock::now();
      int spins = 0;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        if (stop_.load(std::memory_order_relaxed)) return;
        NEXUS_CPU_RELAX();
        // Yield now and then so an oversubscribed machine still runs the thread we wait for.
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
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: ordered before the sleepers_ check below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  std::exception_ptr err;
  try {
    fn(0, n_threads_);
  } catch (...) {
    err = std::current_exception();
  }
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    NEXUS_CPU_RELAX();
    if (spins % 64 == 63) std::this_thread::yield();
  }
  job_ = nullptr;
  if (err) std::rethrow_exception(err);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_per_thread) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n < 2 * std::max<int64_t>(1, min_per_thread)) {
    fn(0, n);
    return;
  }
  run([&](int i, int nt) {
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = std::min<int64_t>(n, chunk * i);
    const int64_t e = std::min<int64_t>(n, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace nexus
