// Pipeline parallel training over a communicator: rank s of N holds stage s, the blocks
// [L s / N, L (s + 1) / N) (the first stage also the embeddings, the last the final norm and the
// output head; a tied token table is on both, its gradients summed). Each step's micro-batches
// run on the 1F1B schedule (PipeDream-Flush, as Megatron-LM): stage s starts N - 1 - s forward
// passes, then alternates one forward and one backward, then drains the backward passes, so at
// most N - s micro-batches are in flight. A stage keeps only the input of each micro-batch in
// flight and runs that micro-batch's forward again right before its backward (the last stage runs
// its backward right after its forward and never does): activation memory of one micro-batch, for
// one more forward pass of the stages but the last. Boundary activations and their gradients go
// to the neighbouring stages by send/receive pairs, which never wait on each other.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nexus/dist/communicator.h"
#include "nexus/dist/model_parallel.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/trainer.h"

namespace nexus::dist {

// Stage s of n's blocks: [first, first + count).
struct StageLayers {
  int64_t first = 0, count = 0;
};
StageLayers pipeline_stage(int64_t n_layers, int stage, int stages);

// Whether a model splits into `stages` stages of at least one block each (transformers only);
// the error names the numbers.
Status check_pipeline(const ModelConfig& full, int stages);

class PipelineTraining final : public ModelParallel {
 public:
  PipelineTraining(Communicator& comm, const ModelConfig& full,
                   std::span<const train::ParamInfo> full_tensors);

  // This rank's stage: its config (n_layers its blocks') and the TrainOptions fields that make a
  // TrainModel that stage.
  ModelConfig part_config() const override;
  void configure(train::TrainOptions* o) override;
  // The stage's parameter layout (that of its TrainModel).
  std::span<const train::ParamInfo> part_tensors() const override { return stage_[rank_]; }
  const char* kind() const override { return "pipeline parallel"; }

  // The stage's tensors of a full-layout array (parameters, or an element-wise optimizer buffer),
  // and the way back: every stage's into the full layout on rank 0 (collective; `full` empty on
  // the other ranks). As many floats per rank as its stage holds.
  void cut(std::span<const float> full, std::span<float> stage) const override;
  void gather(std::span<const float> stage, std::span<float> full) override;
  size_t full_floats() const override { return full_floats_; }
  size_t part_floats() const override;

  int world() const override { return 1; }  // every stage sees every micro-batch
  void ready(std::span<float>, size_t, size_t) override {}
  void finish(std::span<float>) override {}
  double mean(double local) override;
  double grad_sumsq(std::span<const float> grads, ThreadPool* pool) override;
  void update(train::Optimizer& optimizer, std::span<float> params, std::span<float> grads,
              float lr, float grad_scale) override;
  bool runs_micro_batches() const override { return true; }
  double run_micro_batches(train::TrainModel& model, std::span<const MicroBatch> batches) override;

 private:
  // Each stage's tensors: their full-layout index, and their layout in the stage.
  std::vector<train::ParamInfo> layout(int stage, std::vector<size_t>* full_index) const;
  bool first() const { return rank_ == 0; }
  bool last() const { return rank_ == size_ - 1; }
  // The tied token table's gradient, summed over the first and last stages.
  void sum_tied(train::TrainModel& model);

  Communicator& comm_;
  int rank_, size_;
  ModelConfig full_;
  std::vector<train::ParamInfo> full_tensors_;
  size_t full_floats_ = 0;
  std::vector<std::vector<train::ParamInfo>> stage_;  // by stage
  std::vector<std::vector<size_t>> index_;            // by stage: each tensor's full index
  std::vector<float> tied_zeros_;                     // a middle stage's share of sum_tied
};

}  // namespace nexus::dist
