// Selective state-space ops (Mamba-1 and Mamba-2 mixers): the causal depthwise conv with its
// rolling state and the selective scan, forward and backward (arguments in backends/api/ssm.h).
// Front-ends check the shapes, open a profiler span and run the device's first variant.
#pragma once

#include <cmath>

#include "backends/api/ssm.h"
#include "backends/cpu/ssm.h"
#include "nexus/core/thread_pool.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<SsmConvArgs> {
  static constexpr const char* kName = "ssm_conv";
  static KernelVariants<SsmConvArgs> cpu() { return cpu::ssm_conv_kernels(); }
};
template <>
struct OpKernels<SsmConvBackwardArgs> {
  static constexpr const char* kName = "ssm_conv_backward";
  static KernelVariants<SsmConvBackwardArgs> cpu() { return cpu::ssm_conv_backward_kernels(); }
};
template <>
struct OpKernels<SsmScanArgs> {
  static constexpr const char* kName = "ssm_scan";
  static KernelVariants<SsmScanArgs> cpu() { return cpu::ssm_scan_kernels(); }
};
template <>
struct OpKernels<SsmScanBackwardArgs> {
  static constexpr const char* kName = "ssm_scan_backward";
  static KernelVariants<SsmScanBackwardArgs> cpu() { return cpu::ssm_scan_backward_kernels(); }
};

void ssm_conv(const SsmConvArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void ssm_conv_backward(const SsmConvBackwardArgs& a, ThreadPool* pool = nullptr,
                       Device device = Device::cpu());
void ssm_scan(const SsmScanArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void ssm_scan_backward(const SsmScanBackwardArgs& a, ThreadPool* pool = nullptr,
                       Device device = Device::cpu());

// softplus(v) = log(1 + e^v), taken as v above 20 (where they agree in f32), as Mamba does.
inline float softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

}  // namespace nexus
