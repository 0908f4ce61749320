// `--tp N` for the inference commands (run, bench): the MPI communicator of the N ranks mpirun
// started and the model's tensor-parallel group over it; rank 0 alone prints.
#pragma once

#include <memory>
#include <string>

#include "nexus/dist/communicator.h"
#include "nexus/dist/tensor_parallel_group.h"
#include "nexus/status.h"

namespace nexus::cli {

struct TpRun {
  std::unique_ptr<dist::Communicator> comm;         // null with --tp 1
  std::unique_ptr<dist::CommTensorParallel> group;  // null with --tp 1
  bool leader() const { return comm == nullptr || comm->rank() == 0; }
  int size() const { return comm ? comm->size() : 1; }
  // Prints the error (prefixed by the rank under mpirun) and ends every rank with code 1 (a rank
  // left alone would wait in a collective for ever). Returns 1 in one process.
  int fail(const char* command, const std::string& message) const;
};

// --tp N: N >= 1; N > 1 needs mpirun -np N and a build with MPI. A job of several ranks without
// --tp is refused too (each rank would run the whole command and print it).
Result<TpRun> start_tensor_parallel(int tp);

}  // namespace nexus::cli
