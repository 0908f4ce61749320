// Normalisation ops, forward and backward, for inference and training alike (the same kernels, so
// the same bits): RMSNorm (llama, qwen) and LayerNorm (gpt2). Arguments in backends/api/norm.h.
#pragma once

#include "backends/api/norm.h"
#include "backends/cpu/norm.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<RmsNormArgs> {
  static constexpr const char* kName = "rms_norm";
  static KernelVariants<RmsNormArgs> cpu() { return cpu::rms_norm_kernels(); }
  static KernelVariants<RmsNormArgs> cuda() { return cuda::rms_norm_kernels(); }
};
template <>
struct OpKernels<RmsNormBackwardArgs> {
  static constexpr const char* kName = "rms_norm_backward";
  static KernelVariants<RmsNormBackwardArgs> cpu() { return cpu::rms_norm_backward_kernels(); }
  static KernelVariants<RmsNormBackwardArgs> cuda() { return cuda::rms_norm_backward_kernels(); }
};
template <>
struct OpKernels<LayerNormArgs> {
  static constexpr const char* kName = "layer_norm";
  static KernelVariants<LayerNormArgs> cpu() { return cpu::layer_norm_kernels(); }
  static KernelVariants<LayerNormArgs> cuda() { return cuda::layer_norm_kernels(); }
};
template <>
struct OpKernels<LayerNormBackwardArgs> {
  static constexpr const char* kName = "layer_norm_backward";
  static KernelVariants<LayerNormBackwardArgs> cpu() { return cpu::layer_norm_backward_kernels(); }
  static KernelVariants<LayerNormBackwardArgs> cuda() {
    return cuda::layer_norm_backward_kernels();
  }
};

// Each checks its arguments (throws nexus::Error naming the op and the bad value) and runs the
// best kernel of `device`, its rows split over `pool` when given.
void rms_norm(const RmsNormArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void rms_norm_backward(const RmsNormBackwardArgs& a, ThreadPool* pool = nullptr,
                       Device device = Device::cpu());
void layer_norm(const LayerNormArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void layer_norm_backward(const LayerNormBackwardArgs& a, ThreadPool* pool = nullptr,
                         Device device = Device::cpu());

}  // namespace nexus
