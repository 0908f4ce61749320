// The communicator seam of distributed training: ranks, collectives on f32 buffers, and
// non-blocking sums whose tickets a caller waits on. MPI sits behind it (mpi_communicator.cc,
// built where Open MPI's headers are: `make deps` installs libopenmpi-dev); one process is the
// local communicator; NCCL can sit behind the same calls on GPUs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "nexus/status.h"

namespace nexus::dist {

// How a non-blocking sum travels: f32, or rounded to bf16 (half the bytes; each rank's values and
// the partial sums are rounded to nearest even, the sum itself is taken in f32).
enum class CommDType { kF32, kBF16 };

class Communicator {
 public:
  using Ticket = uint64_t;
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi" or "local".
  virtual const char* name() const = 0;
  // What carries the bytes, for progress lines ("shared memory", "tcp", "one process").
  virtual std::string transport() const = 0;

  // Sums across ranks, in place, every rank getting the result.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  // The same without waiting: the buffer belongs to the communicator until wait(ticket) returns.
  // Sums run one after the other in the order they were started, on every rank alike.
  virtual Ticket start_all_reduce_sum(std::span<float> data, CommDType dtype) = 0;
  virtual void wait(Ticket ticket) = 0;
  // Rank r's part of the sum across ranks of `in` ([sum(counts)] floats, the same layout on every
  // rank): out[0, counts[r]) = sum over ranks of in[offset_r, offset_r + counts[r]). Started like
  // a non-blocking sum (in and out belong to the communicator until wait), or waited for at once.
  virtual Ticket start_reduce_scatter_sum(std::span<const float> in, std::span<float> out,
                                          std::span<const size_t> counts) = 0;
  void reduce_scatter_sum(std::span<const float> in, std::span<float> out,
                          std::span<const size_t> counts) {
    wait(start_reduce_scatter_sum(in, out, counts));
  }
  // data[offset_r, offset_r + counts[r]) from each rank r into every rank's `data` (in place).
  virtual void all_gather(std::span<float> data, std::span<const size_t> counts) = 0;
  // Each rank's `mine` (counts[r] floats) into root's `all` at offset_r; `all` is read only on
  // root, which must already hold its own part in place.
  virtual void gather(std::span<const float> mine, std::span<float> all,
                      std::span<const size_t> counts, int root) = 0;
  // root's bytes into every rank's.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Point to point (pipeline stages): sends to rank `dst`, receives from rank `src`, or both at
  // once (so that two ranks exchanging with each other never wait on each other's send).
  // A negative rank skips that side. Blocking; every send meets one receive of its size.
  virtual void send_recv(std::span<const float> out, int dst, std::span<float> in, int src) = 0;
  void send(std::span<const float> out, int dst) { send_recv(out, dst, {}, -1); }
  void recv(std::span<float> in, int src) { send_recv({}, -1, in, src); }
  // Ends every rank of the job with this exit code (a rank that cannot go on must not leave the
  // others waiting in a collective).
  [[noreturn]] virtual void abort(int code) = 0;
  // Seconds spent inside collectives (from the first byte sent to the result), and of those the
  // seconds a caller was blocked waiting for them (the rest overlapped its work).
  virtual double comm_seconds() const = 0;
  virtual double blocked_seconds() const = 0;
};

// Every rank's peak resident memory, "1.89 GiB, 1.89 GiB" in rank order (collective).
std::string peak_rss_by_rank(Communicator& comm);

// One process: every collective is the identity.
std::unique_ptr<Communicator> make_local_communicator();

// True when this process was started by mpirun (Open MPI's or a PMI launcher's environment).
bool launched_by_mpirun();
// True when this build has the MPI communicator.
bool mpi_built();

// The communicator of this process: MPI's world when launched by mpirun (an error naming the
// fix when this build has no MPI), else the local one.
Result<std::unique_ptr<Communicator>> make_communicator();

// The text for flags that need MPI in a build without it.
std::string mpi_missing_hint();

}  // namespace nexus::dist
