// AdamW with decoupled weight decay over the flat parameter / gradient arrays, global-norm
// gradient clipping, and learning-rate schedules (warmup then cosine, linear or constant).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "train/train_model.h"

namespace nexus::train {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied to tensors of rank >= 2 only (not norms)
};

// The optimizer seam: every optimizer updates the flat parameter array from the flat gradient
// array and exposes its state as named f32 buffers, which is all a checkpoint needs to resume it
// bit-exactly (restore by copying the saved buffers back into state() and calling set_steps()).
struct StateBuffer {
  std::string name;  // stable across runs, e.g. "adamw.m"
  std::span<float> data;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update at learning rate `lr`; increments steps().
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;
  virtual const char* name() const = 0;  // "adamw", "sgd", "adafactor"
  virtual std::vector<StateBuffer> state() = 0;
  int64_t steps() const { return t_; }
  void set_steps(int64_t t) { t_ = t; }

 protected:
  int64_t t_ = 0;
};

// AdamW state: first and second moments in one allocation (2 x n_params floats).
class AdamW final : public Optimizer {
 public:
  // Sized for `model`'s parameters; the decay mask follows its tensor table.
  AdamW(const TrainModel& model, const AdamWOptions& opts);
  ~AdamW() override;
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update of params from grads at learning rate `lr`, as torch.optim.AdamW does it:
  // p -= lr wd p; m, v moments; p -= lr m_hat / (sqrt(v_hat) + eps). One pass over the arrays.
  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  const char* name() const override { return "adamw"; }
  std::vector<StateBuffer> state() override;
  const AdamWOptions& options() const { return opts_; }

 private:
  struct Range {
    size_t begin, end;
    bool decay;
  };
  AdamWOptions opts_;
  std::vector<Range> ranges_;
  size_t n_ = 0;
  float* state_ = nullptr;  // m then v
};

// Scales grads so that their global L2 norm is at most max_norm (torch's clip_grad_norm_: factor
// max_norm / (norm + 1e-6) when below 1). Returns the norm before clipping.
float clip_grad_norm(std::span<float> grads, float max_norm);

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  float lr = 1e-3f;     // peak learning rate
  float min_lr = 0.0f;  // floor reached at total_steps (linear / cosine)
  int64_t warmup = 0;   // steps of linear warmup from lr / warmup
  int64_t total_steps = 1;
  LrDecay decay = LrDecay::kCosine;

  // Learning rate of step `step` (0-based).
  float at(int64_t step) const;
};

}  // namespace nexus::train

namespace nexus::train {

// Every optimizer's settings in one place, for the CLI, configs and checkpoints.
struct OptimizerOptions {
  std::string name = "adamw";  // "adamw" | "sgd" | "adafactor"
  AdamWOptions adamw;
  float momentum = 0.9f;        // sgd
  float sgd_weight_decay = 0.0f;  // sgd, coupled (added to the gradient, as torch.optim.SGD)
  float adafactor_decay = -0.8f;  // adafactor: beta2_t = 1 - t^decay
  float adafactor_eps1 = 1e-30f;  // regularizes the squared gradient
  float adafactor_clip = 1.0f;    // update RMS clipping threshold
};

// The optimizer named by opts.name for `model`, or an error naming the unknown optimizer.
Result<std::unique_ptr<Optimizer>> make_optimizer(const TrainModel& model,
                                                  const OptimizerOptions& opts);

}  // namespace nexus::train
