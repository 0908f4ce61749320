// The training loop as a library: gradient accumulation over micro-batches from a DataLoader,
// clipping, the optimizer step at the scheduled learning rate, validation passes, and hooks for
// the caller's logging and checkpoints. `nexus train` is a thin shell around it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "nexus/status.h"
#include "nexus/train/data_loader.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/precision.h"
#include "nexus/train/train_model.h"

namespace nexus::train {

// Data parallelism's seam (nexus/dist/data_parallel.h implements it over a communicator): each
// rank's trainer hands it the gradients of a step's last micro-batch as backward completes them,
// waits for it before the update, takes the loss and the gradient norm over all ranks from it, and
// lets it make the update (ZeRO updates this rank's shard and gathers the parameters).
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  virtual int world() const = 0;
  // The gradients of parameters [begin, end) are final on this rank (called from backward).
  virtual void ready(std::span<float> grads, size_t begin, size_t end) = 0;
  // After backward: every exchange done; grads then hold the sum or the mean over ranks
  // (everywhere, or at least on this rank's shard), which grad_sumsq and update account for.
  virtual void finish(std::span<float> grads) = 0;
  // The mean over ranks of each rank's value (losses).
  virtual double mean(double local) = 0;
  // The sum of squares of the mean gradient over ranks (of grads as finish() left them).
  virtual double grad_sumsq(std::span<const float> grads, ThreadPool* pool) = 0;
  // The optimizer step (clip factor grad_scale); the parameters are the same on every rank after.
  virtual void update(Optimizer& optimizer, std::span<float> params, std::span<float> grads,
                      float lr, float grad_scale) = 0;
  // Streaming (ZeRO 2): the model keeps no full gradient (it is built with update_in_backward and
  // hands over each range as backward completes it, its buffer reused right after), and the
  // exchange keeps the sum of this rank's shard over the step's micro-batches. Then begin_step()
  // opens a step, take() gets every range of every micro-batch, finish_streamed(scale) ends the
  // step (its gradients times `scale`, the mean over ranks), and grad_sumsq and update get empty
  // gradient spans.
  virtual bool streams_gradients() const { return false; }
  virtual void begin_step() {}
  virtual void take(size_t begin, size_t end, const float* grads) {
    (void)begin, (void)end, (void)grads;
  }
  virtual void finish_streamed(float scale) { (void)scale; }
  // Pipeline parallel: the exchange runs each step's micro-batches itself (its schedule
  // interleaves the stages' forward and backward passes, and the loss is the last stage's) and
  // returns the sum of their mean losses (0 where this rank has no loss; mean() then gives every
  // rank the step's). The trainer scales and applies the gradients as after its own loop.
  struct MicroBatch {
    int rows = 0, seq_len = 0;
    std::vector<int32_t> inputs, targets;  // owned: the loader's spans end at its next batch
  };
  virtual bool runs_micro_batches() const { return false; }
  virtual double run_micro_batches(TrainModel& model, std::span<const MicroBatch> batches) {
    (void)model, (void)batches;
    return 0.0;
  }
};

struct TrainerOptions {
  int64_t steps = 100;  // optimizer steps in the whole run (the schedule's length)
  int64_t accum = 1;    // micro-batches per optimizer step
  LrSchedule schedule;
  float clip = 1.0f;  // global gradient-norm limit; 0 = off (the norm is still measured)
  // Loss scaling (fp16 training): when set, the loss gradient is multiplied by the scaler's scale,
  // the gradients are divided by it before clipping, and a step whose gradients are not all
  // finite is skipped (the parameters and the optimizer state are left as they were).
  std::optional<LossScaleOptions> loss_scale;
  // Knowledge distillation: `teacher(batch)` gives the teacher's logits of each micro-batch
  // ([rows * seq_len, n_vocab], valid until the next call), and the model trains on
  // TrainModel::set_teacher's loss with this temperature and alpha.
  struct Distill {
    std::function<const float*(const Batch&)> teacher;
    float temperature = 2.0f, alpha = 0.5f;
  };
  std::optional<Distill> distill = std::nullopt;
  // Parameters that are exactly zero when the trainer is made stay zero after every update: a
  // pruned model (2:4 or unstructured) fine-tunes without losing its pattern. The zeros are found
  // again from the parameters on a resume, so they need no place in a checkpoint.
  bool keep_zeros = false;
  // Data parallel: the exchange between this rank and the others (null: one process). The loader
  // gives this rank's share of every global batch; losses and norms are over all ranks.
  GradientExchange* exchange = nullptr;
};

// What one optimizer step did.
struct StepStats {
  int64_t step = 0;  // 1-based number of this step
  float loss = 0;    // mean loss over the step's micro-batches
  float lr = 0;
  float grad_norm = 0;     // before clipping
  int64_t tokens = 0;      // tokens trained on so far, this step included
  double seconds = 0;      // wall time of this step
  double data_wait_s = 0;  // of which waiting for the loader
  float loss_scale = 1;    // the scale this step's gradients were computed with
  bool skipped = false;    // non-finite gradients under loss scaling: no update was made
};

// Whether the options make a run: steps and accum >= 1; the schedule's lr and min_lr finite and
// >= 0 (as torch.optim: a negative rate would climb the loss), warmup >= 0; clip finite and >= 0.
// An error naming the first setting that does not, else ok.
Status validate(const TrainerOptions& options);

// Whether the optimizer step can run in backward (TrainOptions::update_in_backward) with these
// options: an error naming each setting in the way, else ok.
Status check_update_in_backward(const TrainerOptions& options, const Optimizer& optimizer);

class Trainer {
 public:
  // All referenced objects must outlive the trainer. The loader's batch must fit the model.
  // With the model's update_in_backward the optimizer updates each block during backward():
  // that needs accum 1, clip 0, no loss scaling and an optimizer that updates by ranges (else
  // this throws naming what is in the way).
  Trainer(TrainModel& model, Optimizer& optimizer, DataLoader& loader,
          const TrainerOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Zeroes the gradients and adds those of the next `accum` micro-batches, scaled by 1/accum so
  // that they are the mean over micro-batches (backward() adds d(mean loss of one micro-batch)).
  // Returns the mean loss. Does not touch the parameters; step() calls it.
  float accumulate();
  // One optimizer step: accumulate(), clip, update at schedule.at(step_index()).
  StepStats step();
  // Mean validation loss (weighted by tokens) over the first `max_batches` batches of `val` (0:
  // all of them); the pass restarts from the beginning each call. Leaves the gradients alone.
  float evaluate(SequentialBatches& val, int64_t max_batches);

  int64_t step_index() const { return step_; }  // optimizer steps completed
  int64_t tokens() const { return tokens_; }
  // Sets the position after a resume (the loader and optimizer are restored by the caller).
  void set_progress(int64_t step, int64_t tokens) { step_ = step, tokens_ = tokens; }
  bool done() const { return step_ >= opts_.steps; }
  const TrainerOptions& options() const { return opts_; }
  // The loss scaler (null without loss scaling), for reports and checkpoints.
  LossScaler* loss_scaler() { return scaler_ ? &*scaler_ : nullptr; }

 private:
  // Clips and updates from the accumulated gradients (unless loss scaling skips the step).
  void update(StepStats& s);
  // ZeRO 2: the exchange holds the gradients (GradientExchange::streams_gradients).
  bool streaming() const;
  // Sets the parameters [begin, end) that keep_zeros holds at zero back to zero.
  void rezero(size_t begin, size_t end);
  TrainModel& model_;
  Optimizer& opt_;
  DataLoader& loader_;
  TrainerOptions opts_;
  int64_t step_ = 0, tokens_ = 0;
  double wait_ = 0;
  std::optional<LossScaler> scaler_;
  // keep_zeros: bit i of word i / 64 set where parameter i was zero at the start.
  std::vector<uint64_t> zero_bits_;
  // Updating in backward: the step's learning rate and its running sum of squared gradients.
  float lr_in_backward_ = 0;
  double sumsq_in_backward_ = 0;
};

}  // namespace nexus::train
