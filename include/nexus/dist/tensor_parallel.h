// Tensor parallelism over a communicator (Megatron's split, models/tensor_parallel.h): every rank
// of the communicator holds a slice of each block (its heads and its share of the feed-forward
// width) and sees every token; the blocks sum their partial products over the ranks.
// - CommTensorParallel (tensor_parallel_group.h) is the communicator as a model's group.
// - TensorParallelTraining cuts a full model's parameters and optimizer state into a rank's slice
//   and gathers them back (for checkpoints and the export, which keep the one-process format),
//   and is the trainer's gradient exchange: the ranks share every batch, so all it sums is the
//   gradient norm over the slices and the gradients of the few whole tensors every head shares.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nexus/dist/communicator.h"
#include "nexus/dist/model_parallel.h"
#include "nexus/dist/tensor_parallel_group.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/trainer.h"

namespace nexus::dist {

class TensorParallelTraining final : public ModelParallel {
 public:
  // `full` is the whole model's config and `full_tensors` its parameter layout (a TrainModel of
  // the full config), the same on every rank.
  TensorParallelTraining(Communicator& comm, const ModelConfig& full,
                         std::span<const train::ParamInfo> full_tensors);

  const ModelConfig& full_config() const { return full_; }
  // This rank's slice of the config (tensor_parallel_config); configure() sets TrainOptions::tp.
  ModelConfig part_config() const override;
  void configure(train::TrainOptions* o) override { o->tp = &group_; }
  std::span<const train::ParamInfo> part_tensors() const override { return slice_; }
  const char* kind() const override { return "tensor parallel"; }
  size_t full_floats() const override { return full_floats_; }
  size_t part_floats() const override { return slice_floats_; }

  // This rank's slice of a full-layout array (parameters, or an element-wise optimizer buffer),
  // and the way back: every rank's slices into the full layout on rank 0 (collective; `full` is
  // empty on the other ranks).
  void cut(std::span<const float> full, std::span<float> slice) const override;
  void gather(std::span<const float> slice, std::span<float> full) override;

  int world() const override { return 1; }  // the ranks share every batch
  void ready(std::span<float>, size_t, size_t) override {}
  // Sums the gradients of the whole tensors each rank saw only its heads of (qwen3's q and k
  // norms) over the ranks.
  void finish(std::span<float> grads) override;
  double mean(double local) override { return local; }
  double grad_sumsq(std::span<const float> grads, ThreadPool* pool) override;
  void update(train::Optimizer& optimizer, std::span<float> params, std::span<float> grads,
              float lr, float grad_scale) override;

 private:
  Communicator& comm_;
  CommTensorParallel group_;
  ModelConfig full_;
  std::vector<train::ParamInfo> full_tensors_, slice_;
  size_t full_floats_ = 0, slice_floats_ = 0;
  std::vector<bool> split_;    // by tensor: a slice (else whole, the same on every rank)
  std::vector<bool> partial_;  // by tensor: whole, but each rank has part of its gradient
};

}  // namespace nexus::dist
