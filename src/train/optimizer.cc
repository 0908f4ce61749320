// AdamW, gradient clipping and LR schedules (see optimizer.h).
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/allocator.h"

namespace nexus::train {

AdamW::AdamW(const TrainModel& model, const AdamWOptions& opts) : opts_(opts) {
  for (const ParamInfo& info : model.tensors()) {
    ranges_.push_back(
        {info.offset, info.offset + static_cast<size_t>(info.numel), info.shape.size() >= 2});
    n_ = std::max(n_, ranges_.back().end);
  }
  state_ =
      static_cast<float*>(aligned_alloc_counted(2 * n_ * sizeof(float), MemCategory::kOptimizer));
  std::memset(state_, 0, 2 * n_ * sizeof(float));
}

AdamW::~AdamW() { aligned_free_counted(state_, 2 * n_ * sizeof(float), MemCategory::kOptimizer); }

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  NEXUS_CHECK(params.size() == n_ && grads.size() == n_,
              "[adamw] expected " + std::to_string(n_) + " parameters and gradients, got " +
                  std::to_string(params.size()) + " and " + std::to_string(grads.size()));
  ++t_;
  const float b1 = opts_.beta1, b2 = opts_.beta2;
  // Bias corrections in double: 1 - beta^t loses digits in f32 once beta^t is close to 1.
  const float step_size =
      static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), static_cast<double>(t_))));
  const float inv_bc2_sqrt = static_cast<float>(
      1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), static_cast<double>(t_))));
  float* m = state_;
  float* v = state_ + n_;
  for (const Range& r : ranges_) {
    const float keep = r.decay ? 1.0f - lr * opts_.weight_decay : 1.0f;
    for (size_t i = r.begin; i < r.end; ++i) {
      const float g = grads[i];
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      params[i] =
          params[i] * keep - step_size * m[i] / (std::sqrt(v[i]) * inv_bc2_sqrt + opts_.eps);
    }
  }
}

std::vector<StateBuffer> AdamW::state() {
  return {{"adamw.m", {state_, n_}}, {"adamw.v", {state_ + n_, n_}}};
}

float clip_grad_norm(std::span<float> grads, float max_norm) {
  double ss = 0.0;
  for (float g : grads) ss += static_cast<double>(g) * g;
  const float norm = static_cast<float>(std::sqrt(ss));
  const float coef = max_norm / (norm + 1e-6f);
  if (coef < 1.0f)
    for (float& g : grads) g *= coef;
  return norm;
}

float LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup)
    return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  if (decay == LrDecay::kConstant || total_steps <= warmup) return lr;
  const double frac =
      std::clamp(static_cast<double>(step - warmup) /
                     static_cast<double>(std::max<int64_t>(1, total_steps - warmup)),
                 0.0, 1.0);
  const double k =
      decay == LrDecay::kLinear ? 1.0 - frac : 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
  return min_lr + static_cast<float>(k) * (lr - min_lr);
}

}  // namespace nexus::train

namespace nexus::train {

Result<std::unique_ptr<Optimizer>> make_optimizer(const TrainModel& model,
                                                  const OptimizerOptions& opts) {
  if (opts.name == "adamw") return std::unique_ptr<Optimizer>(new AdamW(model, opts.adamw));
  return Status::error("[train] unknown optimizer '" + opts.name + "' (known: adamw)");
}

}  // namespace nexus::train
