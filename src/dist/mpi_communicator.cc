// The communicator over MPI. Every MPI call runs on one worker thread (MPI_THREAD_FUNNELED: the
// worker called MPI_Init_thread), in the order the calls were made: a non-blocking sum is a job
// queued for it, so gradients travel while the caller's thread goes on with backward (MPI's own
// non-blocking collectives only move while the caller is inside MPI). The worker is SCHED_IDLE: it
// runs on a core the compute threads leave idle, and when they wait for it. With every core
// computing (2 ranks on 2 vCPUs) a worker at normal priority took the core from backward while it
// polled for the other rank: GPT-2 124M steps at 0.68-0.69x one process against 0.78-0.80x idle;
// making Open MPI's polling yield (mpi_yield_when_idle=1) was slower still (bench/dist_train.sh).
#include <mpi.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nexus/dist/communicator.h"
#include "nexus/dtype.h"
#include "nexus/profile.h"

namespace nexus::dist {
namespace {

using Clock = std::chrono::steady_clock;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("[dist] MPI ") + what + " failed: " + std::string(text, len));
}

// bf16 sums: each value widened, added in f32, rounded back.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

std::vector<int> displacements(std::span<const size_t> counts, std::vector<int>* as_int) {
  std::vector<int> displ(counts.size());
  as_int->resize(counts.size());
  size_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    NEXUS_CHECK(at <= static_cast<size_t>(INT32_MAX) && counts[r] <= static_cast<size_t>(INT32_MAX),
                "[dist] a collective of more than 2^31 floats");
    displ[r] = static_cast<int>(at);
    (*as_int)[r] = static_cast<int>(counts[r]);
    at += counts[r];
  }
  return displ;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    worker_ = std::thread([this] { loop(); });
    try {
      init();
    } catch (...) {
      stop_worker();
      throw;
    }
  }
  void init() {
    run("mpi init", [this] {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      MPI_Op_create(&bf16_sum, 1, &bf16_op_);
      MPI_Comm local;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
      int local_size = 0;
      MPI_Comm_size(local, &local_size);
      MPI_Comm_free(&local);
      const char* btl = std::getenv("OMPI_MCA_btl");
      const std::string b = btl ? btl : "";
      const bool shm =
          b.empty() || b.find("vader") != std::string::npos || b.find("sm") != std::string::npos;
      transport_ = local_size == size_ && shm ? "shared memory" : "tcp";
    });
    // The counters are for the run's collectives, not the start-up.
    std::lock_guard<std::mutex> l(mu_);
    comm_ = blocked_ = 0;
  }
  void stop_worker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  ~MpiCommunicator() override {
    try {
      run("mpi finalize", [this] {
        MPI_Op_free(&bf16_op_);
        MPI_Finalize();
      });
    } catch (...) {
    }
    stop_worker();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }
  std::string transport() const override { return transport_; }

  void all_reduce_sum(std::span<float> d) override {
    run("all-reduce", [d] {
      check(MPI_Allreduce(MPI_IN_PLACE, d.data(), count(d.size()), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            "all-reduce");
    });
  }
  void all_reduce_sum(std::span<double> d) override {
    run("all-reduce", [d] {
      check(MPI_Allreduce(MPI_IN_PLACE, d.data(), count(d.size()), MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD),
            "all-reduce");
    });
  }
  Ticket start_all_reduce_sum(std::span<float> d, CommDType dtype) override {
    return post(dtype == CommDType::kF32 ? "all-reduce" : "all-reduce (bf16)", [this, d, dtype] {
      if (dtype == CommDType::kF32) {
        check(MPI_Allreduce(MPI_IN_PLACE, d.data(), count(d.size()), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD),
              "all-reduce");
        return;
      }
      half_.resize(d.size());
      for (size_t i = 0; i < d.size(); ++i) half_[i] = f32_to_bf16(d[i]);
      check(MPI_Allreduce(MPI_IN_PLACE, half_.data(), count(d.size()), MPI_UINT16_T, bf16_op_,
                          MPI_COMM_WORLD),
            "all-reduce (bf16)");
      for (size_t i = 0; i < d.size(); ++i) d[i] = bf16_to_f32(half_[i]);
    });
  }
  void wait(Ticket t) override {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_ >= t; });
    blocked_ += std::chrono::duration<double>(Clock::now() - t0).count();
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  Ticket start_reduce_scatter_sum(std::span<const float> in, std::span<float> out,
                                  std::span<const size_t> counts) override {
    std::vector<int> c;
    displacements(counts, &c);
    NEXUS_CHECK(static_cast<int>(c.size()) == size_ && out.size() >= counts[rank_],
                "[dist] reduce_scatter_sum: a count per rank, and room for this rank's");
    return post("reduce-scatter", [in, out, c = std::move(c)] {
      check(MPI_Reduce_scatter(in.data(), out.data(), c.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            "reduce-scatter");
    });
  }
  void all_gather(std::span<float> data, std::span<const size_t> counts) override {
    run("all-gather", [&] {
      std::vector<int> c;
      std::vector<int> displ = displacements(counts, &c);
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.data(), c.data(), displ.data(),
                           MPI_FLOAT, MPI_COMM_WORLD),
            "all-gather");
    });
  }
  void gather(std::span<const float> mine, std::span<float> all, std::span<const size_t> counts,
              int root) override {
    run("gather", [&] {
      std::vector<int> c;
      std::vector<int> displ = displacements(counts, &c);
      if (rank_ == root)
        check(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), c.data(), displ.data(),
                          MPI_FLOAT, root, MPI_COMM_WORLD),
              "gather");
      else
        check(MPI_Gatherv(mine.data(), c[rank_], MPI_FLOAT, nullptr, nullptr, nullptr, MPI_FLOAT,
                          root, MPI_COMM_WORLD),
              "gather");
    });
  }
  void broadcast(void* data, size_t bytes, int root) override {
    run("broadcast",
        [&] { check(MPI_Bcast(data, count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast"); });
  }
  void send_recv(std::span<const float> out, int dst, std::span<float> in, int src) override {
    run("send/recv", [&] {
      NEXUS_CHECK(out.size() <= static_cast<size_t>(INT32_MAX) &&
                      in.size() <= static_cast<size_t>(INT32_MAX),
                  "[dist] a message of more than 2^31 floats");
      const int n_out = static_cast<int>(out.size()), n_in = static_cast<int>(in.size());
      if (dst >= 0 && src >= 0)
        check(MPI_Sendrecv(out.data(), n_out, MPI_FLOAT, dst, 0, in.data(), n_in, MPI_FLOAT, src, 0,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "sendrecv");
      else if (dst >= 0)
        check(MPI_Send(out.data(), n_out, MPI_FLOAT, dst, 0, MPI_COMM_WORLD), "send");
      else if (src >= 0)
        check(MPI_Recv(in.data(), n_in, MPI_FLOAT, src, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "recv");
    });
  }
  void barrier() override {
    run("barrier", [] { check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); });
  }
  [[noreturn]] void abort(int code) override {
    // From this thread: the worker may be inside a collective that will never complete.
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  double comm_seconds() const override {
    std::lock_guard<std::mutex> l(mu_);
    return comm_;
  }
  double blocked_seconds() const override {
    std::lock_guard<std::mutex> l(mu_);
    return blocked_;
  }

 private:
  static int count(size_t n) {
    NEXUS_CHECK(n <= static_cast<size_t>(INT32_MAX), "[dist] a collective of more than 2^31 items");
    return static_cast<int>(n);
  }
  // `name` (a literal) labels the job's span on the worker's thread in profiles.
  Ticket post(const char* name, std::function<void()> job) {
    std::lock_guard<std::mutex> l(mu_);
    jobs_.push_back({name, std::move(job)});
    cv_.notify_all();
    return ++posted_;
  }
  void run(const char* name, std::function<void()> job) { wait(post(name, std::move(job))); }
  void loop() {
    profile::set_thread_name("mpi");
    // The worker runs when a core would otherwise idle (the header says why).
    sched_param idle{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      const auto t0 = Clock::now();
      std::exception_ptr err;
      try {
        NEXUS_PROFILE_SCOPE(job.name);
        job.fn();
      } catch (...) {
        err = std::current_exception();
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      l.lock();
      comm_ += s;
      if (err && !error_) error_ = err;
      ++done_;
      cv_.notify_all();
    }
  }

  int rank_ = 0, size_ = 1;
  std::string transport_;
  MPI_Op bf16_op_ = MPI_OP_NULL;
  std::vector<uint16_t> half_;  // the bf16 sums' buffer (worker only)
  std::thread worker_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Job {
    const char* name;
    std::function<void()> fn;
  };
  std::deque<Job> jobs_;
  Ticket posted_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  double comm_ = 0, blocked_ = 0;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  try {
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>());
  } catch (const Error& e) {
    return Status::error(e.what());
  }
}

}  // namespace nexus::dist
