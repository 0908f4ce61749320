// Data parallel training over a communicator (communicator.h): each rank trains on its share of
// every global batch and the ranks exchange gradients so that every update is the one a single
// process would make on the whole batch.
// - ZeRO 0 (DDP): the gradients are all-reduced in buckets of whole tensors, each bucket started
//   as soon as backward has finished its tensors, so the exchange overlaps the rest of backward.
// - ZeRO 1: the optimizer state is sharded. The gradients are reduce-scattered in the same buckets
//   (each rank gets the sum over ranks of its shard's part of each), each rank updates its shard
//   with an optimizer that holds only that shard's state, and the parameters are all-gathered a
//   bucket at a time (MPI's collectives over the whole model held model-sized temporaries).
// - ZeRO 2: the gradients are sharded too. The model keeps one block's gradients at a time
//   (TrainOptions::update_in_backward's buffers); each block's are reduce-scattered as backward
//   finishes them, and each rank sums only its shard's over the micro-batches.
// The mean over ranks is the sum times 1 / ranks (exact for a power-of-two number of ranks): under
// ZeRO 0 the gradients keep the sum and the factor goes into the norm and the optimizer's scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nexus/dist/communicator.h"
#include "nexus/status.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/trainer.h"

namespace nexus::dist {

struct DataParallelOptions {
  int zero = 0;                            // 0 (DDP) or 1 (optimizer state sharded)
  CommDType comm_dtype = CommDType::kF32;  // gradients on the wire (ZeRO 0's all-reduce)
  size_t bucket_bytes = 4u << 20;          // gradient bytes per all-reduce (whole tensors)
};

// "0", "1", "2"; "f32", "bf16": errors name the flag's accepted values.
Status parse_zero(const std::string& text, int* out);
Status parse_comm_dtype(const std::string& text, CommDType* out);

class DataParallel final : public train::GradientExchange {
 public:
  // `tensors` of a model of n_params floats, the same on every rank.
  DataParallel(Communicator& comm, std::span<const train::ParamInfo> tensors, size_t n_params,
               const DataParallelOptions& options);

  // ZeRO 1: this rank's range [shard_begin, shard_end) of the flat parameters (the whole array
  // under ZeRO 0), every rank's count, and the tensor pieces of this rank's shard (offsets from
  // shard_begin) to build the shard's optimizer with make_optimizer.
  size_t shard_begin() const { return lo_; }
  size_t shard_end() const { return hi_; }
  std::span<const size_t> shard_counts() const { return counts_; }
  std::vector<train::ParamInfo> shard_tensors() const;
  const DataParallelOptions& options() const { return opts_; }
  Communicator& comm() { return comm_; }

  // ZeRO 1 checkpoints: every rank's shard of each of `shard`'s state buffers gathered into
  // `full`'s (an optimizer of the same kind over all the parameters, given on rank 0 only, null
  // elsewhere), with its step count; and the way back, this rank's piece of `full`'s buffers into
  // `shard`'s (every rank holds `full`, restored from a checkpoint). Element-wise optimizers with
  // f32 state only (AdamW, SGD).
  void gather_state(train::Optimizer& shard, train::Optimizer* full);
  void scatter_state(const train::Optimizer& full, train::Optimizer& shard) const;

  // Bytes each rank sends per step for the gradients and (ZeRO 1) parameters, counted as a ring
  // collective sends them: 2 (N - 1) / N of the buffer for an all-reduce, (N - 1) / N for a
  // reduce-scatter or an all-gather.
  double bytes_per_step() const;

  int world() const override { return comm_.size(); }
  void ready(std::span<float> grads, size_t begin, size_t end) override;
  void finish(std::span<float> grads) override;
  double mean(double local) override;
  double grad_sumsq(std::span<const float> grads, ThreadPool* pool) override;
  void update(train::Optimizer& optimizer, std::span<float> params, std::span<float> grads,
              float lr, float grad_scale) override;
  bool streams_gradients() const override { return opts_.zero == 2; }
  void begin_step() override;
  void take(size_t begin, size_t end, const float* grads) override;
  void finish_streamed(float scale) override;

 private:
  void flush(std::span<float> grads);
  // Starts the exchange of grads[begin, end): an all-reduce (ZeRO 0) or a reduce-scatter into
  // this rank's part of shard_grads_ (ZeRO 1).
  void send(std::span<float> grads, size_t begin, size_t end);
  // Each rank's part of [begin, end) (its shard's intersection with it) into counts; returns
  // this rank's.
  size_t parts(size_t begin, size_t end, std::vector<size_t>* counts) const;

  Communicator& comm_;
  DataParallelOptions opts_;
  std::vector<train::ParamInfo> tensors_;
  size_t n_ = 0, lo_ = 0, hi_ = 0;
  std::vector<size_t> counts_;
  // ZeRO 0: the bucket being filled [pending_begin_, pending_end_) and the ones in flight.
  size_t pending_begin_ = 0, pending_end_ = 0;
  std::vector<std::pair<size_t, size_t>> sent_;
  std::vector<Communicator::Ticket> tickets_;
  std::vector<float> shard_grads_;  // ZeRO 1: the reduce-scatter's result; 2: the step's sum
  std::vector<float> part_;         // ZeRO 2: this rank's part of one block's sum
};

}  // namespace nexus::dist
