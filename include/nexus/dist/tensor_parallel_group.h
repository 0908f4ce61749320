// The communicator as a model's tensor-parallel group (Model::load, TrainOptions::tp): every rank
// of the communicator holds a slice of each block (nexus/dist/tensor_parallel.h).
#pragma once

#include <cstdint>
#include <string>

#include "nexus/dist/communicator.h"
#include "nexus/model.h"
#include "nexus/status.h"

namespace nexus::dist {

class CommTensorParallel final : public TensorParallel {
 public:
  explicit CommTensorParallel(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void all_reduce_sum(float* x, int64_t n) override;

 private:
  Communicator& comm_;
};

// "--tp N" or "--pp N" (`flag`): N >= 1; N > 1 needs a build with MPI and exactly N ranks
// (errors name the fix).
Status check_model_parallel_ranks(const std::string& flag, int n, int world);

}  // namespace nexus::dist
