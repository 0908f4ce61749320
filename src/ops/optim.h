// The optimizer ops: the AdamW update and gradient clipping's sum of squares and scaling
// (arguments in backends/api/optim.h), on the CPU or a device holding the parameters, gradients
// and moments.
#pragma once

#include <cstdint>

#include "backends/api/optim.h"
#include "backends/cpu/optim.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<AdamWArgs> {
  static constexpr const char* kName = "adamw";
  static KernelVariants<AdamWArgs> cpu() { return cpu::adamw_kernels(); }
  static KernelVariants<AdamWArgs> cuda() { return cuda::adamw_kernels(); }
};

template <>
struct OpKernels<SumSquaresArgs> {
  static constexpr const char* kName = "sum_squares";
  static KernelVariants<SumSquaresArgs> cpu() { return cpu::sum_squares_kernels(); }
  static KernelVariants<SumSquaresArgs> cuda() { return cuda::sum_squares_kernels(); }
};

template <>
struct OpKernels<ScaleArgs> {
  static constexpr const char* kName = "scale";
  static KernelVariants<ScaleArgs> cpu() { return cpu::scale_kernels(); }
  static KernelVariants<ScaleArgs> cuda() { return cuda::scale_kernels(); }
};

// One AdamW step over a.n elements (f32 moments in m and v, or bf16 ones in m16 and v16).
void adamw_update(const AdamWArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());

// The sum of g[i]^2 over n values, in double; the same for any thread count.
double sum_squares(const float* g, int64_t n, ThreadPool* pool = nullptr,
                   Device device = Device::cpu());

// g[i] *= c for n values.
void scale_values(float* g, int64_t n, float c, ThreadPool* pool = nullptr,
                  Device device = Device::cpu());

}  // namespace nexus
