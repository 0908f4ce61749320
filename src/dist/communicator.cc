// The local communicator and the choice between it and MPI's.
#include "nexus/dist/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "nexus/core/allocator.h"
#include "nexus/core/format_bytes.h"

namespace nexus::dist {

#ifdef NEXUS_HAVE_MPI
// mpi_communicator.cc
Result<std::unique_ptr<Communicator>> make_mpi_communicator();
#endif

namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* name() const override { return "local"; }
  std::string transport() const override { return "one process"; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<double>) override {}
  Ticket start_all_reduce_sum(std::span<float>, CommDType) override { return 0; }
  void wait(Ticket) override {}
  Ticket start_reduce_scatter_sum(std::span<const float> in, std::span<float> out,
                                  std::span<const size_t> counts) override {
    NEXUS_CHECK(counts.size() == 1 && in.size() == counts[0] && out.size() >= counts[0],
                "[dist] reduce_scatter_sum: one rank's counts must cover the input");
    std::copy(in.begin(), in.end(), out.begin());
    return 0;
  }
  void all_gather(std::span<float>, std::span<const size_t>) override {}
  void gather(std::span<const float>, std::span<float>, std::span<const size_t>, int) override {}
  void broadcast(void*, size_t, int) override {}
  void send_recv(std::span<const float>, int dst, std::span<float>, int src) override {
    NEXUS_CHECK(dst < 0 && src < 0, "[dist] one process has no other rank to send to");
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
  double comm_seconds() const override { return 0; }
  double blocked_seconds() const override { return 0; }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

bool mpi_built() {
#ifdef NEXUS_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_missing_hint() {
  return "this nexus was built without MPI: install Open MPI (`make deps` installs openmpi-bin "
         "and libopenmpi-dev), rebuild, and start the ranks with `mpirun -np N nexus ...`";
}

Result<std::unique_ptr<Communicator>> make_communicator() {
  if (!launched_by_mpirun()) return make_local_communicator();
#ifdef NEXUS_HAVE_MPI
  return make_mpi_communicator();
#else
  return Status::error("[dist] started by mpirun, but " + mpi_missing_hint());
#endif
}

std::string peak_rss_by_rank(Communicator& comm) {
  std::vector<double> rss(static_cast<size_t>(comm.size()), 0.0);
  rss[static_cast<size_t>(comm.rank())] = static_cast<double>(peak_rss_bytes());
  comm.all_reduce_sum(rss);
  std::string out;
  for (double b : rss) out += (out.empty() ? "" : ", ") + format_bytes(static_cast<uint64_t>(b));
  return out;
}

}  // namespace nexus::dist
