#include "tensor_parallel_cli.h"

#include "command.h"

namespace nexus::cli {

int TpRun::fail(const char* command, const std::string& message) const {
  if (comm == nullptr || comm->size() == 1) return cli::fail(command, message);
  cli::fail(command, "rank " + std::to_string(comm->rank()) + ": " + message);
  comm->abort(1);
  return 1;  // (abort does not return)
}

Result<TpRun> start_tensor_parallel(int tp) {
  if (tp < 1) return Status::error("--tp must be >= 1, got " + std::to_string(tp));
  if (tp == 1 && !dist::launched_by_mpirun()) return TpRun{};
  if (!dist::mpi_built()) return Status::error("--tp: " + dist::mpi_missing_hint());
  auto comm = dist::make_communicator();
  if (!comm) return comm.status();
  TpRun r;
  r.comm = std::move(comm).value();
  if (tp == 1 && r.comm->size() > 1)
    return Status::error("started by mpirun with " + std::to_string(r.comm->size()) +
                         " ranks: give --tp " + std::to_string(r.comm->size()) +
                         " (tensor parallel), or run one process");
  NEXUS_RETURN_IF_ERROR(dist::check_model_parallel_ranks("--tp", tp, r.comm->size()));
  r.group = std::make_unique<dist::CommTensorParallel>(*r.comm);
  return r;
}

}  // namespace nexus::cli
