// The fused cross-entropy with its backward (llm.c style, one exp pass over each row of logits).
// Arguments in backends/api/loss.h.
#pragma once

#include <cstdint>

#include "backends/api/loss.h"
#include "backends/cpu/cross_entropy.h"
#include "backends/cpu/distill_loss.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<CrossEntropyArgs> {
  static constexpr const char* kName = "cross_entropy";
  static KernelVariants<CrossEntropyArgs> cpu() { return cpu::cross_entropy_kernels(); }
  static KernelVariants<CrossEntropyArgs> cuda() { return cuda::cross_entropy_kernels(); }
};

// For each of n rows of v logits, row_loss[i] = logsumexp(row) - row[targets[i]] (0 when
// targets[i] < 0), and the row is overwritten with d(scale * sum of row losses)/d row =
// (softmax - onehot) * scale. Returns the sum of row_loss, added in row order (the same for any
// thread count). With `round` other than kF32, each row is rounded to it before its loss and its
// gradient after it (mixed precision's logits, rounded while the row is in cache). On a device
// other than the CPU the three arrays live there; only row_loss is copied back, for the sum.
double cross_entropy_fused(float* logits, float* row_loss, const int32_t* targets, int64_t n,
                           int64_t v, float scale, ThreadPool* pool = nullptr,
                           Precision round = Precision::kF32, Device device = Device::cpu());

template <>
struct OpKernels<DistillLossArgs> {
  static constexpr const char* kName = "distill_loss";
  static KernelVariants<DistillLossArgs> cpu() { return cpu::distill_loss_kernels(); }
};

// The distillation loss of backends/api/loss.h over n rows, the gradients in place; returns the
// sum of row_loss in row order. temperature > 0, alpha in [0, 1].
double distill_loss_fused(float* logits, const float* teacher, float* row_loss,
                          const int32_t* targets, int64_t n, int64_t v, float scale,
                          float temperature, float alpha, ThreadPool* pool = nullptr);

}  // namespace nexus
