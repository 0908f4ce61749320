// Tensor parallel training's cut and gather of the parameters and optimizer state, its gradient
// norm, and the communicator as a model's tensor-parallel group.
#include "nexus/dist/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "models/tensor_parallel.h"

namespace nexus::dist {

void CommTensorParallel::all_reduce_sum(float* x, int64_t n) {
  comm_.all_reduce_sum(std::span<float>(x, static_cast<size_t>(n)));
}

Status check_model_parallel_ranks(const std::string& flag, int n, int world) {
  if (n < 1) return Status::error(flag + " must be >= 1");
  if (n == 1) return Status::ok();
  if (!mpi_built()) return Status::error(flag + ": " + mpi_missing_hint());
  if (world != n)
    return Status::error(flag + " " + std::to_string(n) + " needs exactly " + std::to_string(n) +
                         " ranks (mpirun -np " + std::to_string(n) + "), this job has " +
                         std::to_string(world));
  return Status::ok();
}

TensorParallelTraining::TensorParallelTraining(Communicator& comm, const ModelConfig& full,
                                               std::span<const train::ParamInfo> full_tensors)
    : comm_(comm),
      group_(comm),
      full_(full),
      full_tensors_(full_tensors.begin(), full_tensors.end()) {
  // The slice's layout: the same tensors in the same order (TrainModel::layout_params), each of
  // its slice's shape.
  for (const train::ParamInfo& t : full_tensors_) {
    const TpSplit split = tp_split(full_, t.name, comm_.rank(), comm_.size());
    train::ParamInfo s = t;
    s.shape = tp_slice_shape(t.shape, split);
    s.numel = 1;
    for (int64_t d : s.shape) s.numel *= d;
    s.offset = slice_floats_;
    slice_floats_ += static_cast<size_t>(s.numel);
    full_floats_ = std::max(full_floats_, t.offset + static_cast<size_t>(t.numel));
    split_.push_back(split.kind != TpSplit::kWhole);
    partial_.push_back(tp_partial_grad(full_, t.name));
    slice_.push_back(std::move(s));
  }
}

ModelConfig TensorParallelTraining::part_config() const {
  return tensor_parallel_config(full_, comm_.size());
}

void TensorParallelTraining::cut(std::span<const float> full, std::span<float> slice) const {
  NEXUS_CHECK(full.size() == full_floats_ && slice.size() == slice_floats_,
              "[tensor parallel] cut: the arrays are not the model's");
  for (size_t i = 0; i < slice_.size(); ++i) {
    const train::ParamInfo& f = full_tensors_[i];
    const TpSplit split = tp_split(full_, f.name, comm_.rank(), comm_.size());
    const Status st = tp_slice(full.data() + f.offset, DType::kF32, f.shape, split,
                               slice.data() + slice_[i].offset, f.name);
    NEXUS_CHECK(st.is_ok(), st.message());
  }
}

void TensorParallelTraining::gather(std::span<const float> slice, std::span<float> full) {
  const bool root = comm_.rank() == 0;
  NEXUS_CHECK(slice.size() == slice_floats_ && (!root || full.size() == full_floats_),
              "[tensor parallel] gather: the arrays are not the model's");
  const auto size = static_cast<size_t>(comm_.size());
  std::vector<float> all;
  if (root) {
    all.resize(size * slice_floats_);
    std::copy(slice.begin(), slice.end(), all.begin());
  }
  const std::vector<size_t> counts(size, slice_floats_);
  comm_.gather(slice, all, counts, 0);
  if (!root) return;
  // A whole tensor is rank 0's (every rank holds the same).
  for (size_t r = 0; r < size; ++r)
    for (size_t i = 0; i < slice_.size(); ++i) {
      if (!split_[i] && r != 0) continue;
      const train::ParamInfo& f = full_tensors_[i];
      tp_unslice(all.data() + r * slice_floats_ + slice_[i].offset, DType::kF32, f.shape,
                 tp_split(full_, f.name, static_cast<int>(r), comm_.size()),
                 full.data() + f.offset);
    }
}

void TensorParallelTraining::finish(std::span<float> grads) {
  for (size_t i = 0; i < slice_.size(); ++i)
    if (partial_[i])
      comm_.all_reduce_sum(grads.subspan(slice_[i].offset, static_cast<size_t>(slice_[i].numel)));
}

double TensorParallelTraining::grad_sumsq(std::span<const float> grads, ThreadPool* pool) {
  // A split tensor's gradient is this rank's part of it; a whole one's is the same on every rank.
  double sums[2] = {0.0, 0.0};  // split, whole
  for (size_t i = 0; i < slice_.size(); ++i)
    sums[split_[i] ? 0 : 1] += train::grad_sumsq(
        grads.subspan(slice_[i].offset, static_cast<size_t>(slice_[i].numel)), pool);
  comm_.all_reduce_sum(std::span<double>(sums, 1));
  return sums[0] + sums[1];
}

void TensorParallelTraining::update(train::Optimizer& optimizer, std::span<float> params,
                                    std::span<float> grads, float lr, float grad_scale) {
  // Every rank updates its slice and its copy of the whole tensors, which get the same gradients
  // on every rank, so the copies stay equal.
  optimizer.step_scaled(params, grads, lr, grad_scale);
}

}  // namespace nexus::dist
