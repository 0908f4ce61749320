// The dequantizing matrix-vector product (arguments in backends/api/matvec.h): weights in their
// block format times f32 vectors, on the CPU (the f32 reference) or a GPU (the decode step).
#pragma once

#include "backends/api/matvec.h"
#include "backends/cpu/matvec.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<MatvecArgs> {
  static constexpr const char* kName = "matvec";
  static KernelVariants<MatvecArgs> cpu() { return cpu::matvec_kernels(); }
  static KernelVariants<MatvecArgs> cuda() { return cuda::matvec_kernels(); }
};

// Checks the shapes (k a whole number of the type's blocks), then runs the device's kernel.
void matvec(const MatvecArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());

}  // namespace nexus
