// Activation ops, forward and backward, for inference and training alike (the same kernels, so the
// same bits): SwiGLU (llama, qwen) and GPT-2's tanh GELU. Arguments in backends/api/activation.h.
#pragma once

#include "backends/api/activation.h"
#include "backends/cpu/activation.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<SwigluArgs> {
  static constexpr const char* kName = "swiglu";
  static KernelVariants<SwigluArgs> cpu() { return cpu::swiglu_kernels(); }
  static KernelVariants<SwigluArgs> cuda() { return cuda::swiglu_kernels(); }
};
template <>
struct OpKernels<SwigluBackwardArgs> {
  static constexpr const char* kName = "swiglu_backward";
  static KernelVariants<SwigluBackwardArgs> cpu() { return cpu::swiglu_backward_kernels(); }
  static KernelVariants<SwigluBackwardArgs> cuda() { return cuda::swiglu_backward_kernels(); }
};
template <>
struct OpKernels<GeluArgs> {
  static constexpr const char* kName = "gelu";
  static KernelVariants<GeluArgs> cpu() { return cpu::gelu_kernels(); }
  static KernelVariants<GeluArgs> cuda() { return cuda::gelu_kernels(); }
};
template <>
struct OpKernels<GeluBackwardArgs> {
  static constexpr const char* kName = "gelu_backward";
  static KernelVariants<GeluBackwardArgs> cpu() { return cpu::gelu_backward_kernels(); }
  static KernelVariants<GeluBackwardArgs> cuda() { return cuda::gelu_backward_kernels(); }
};

// Each checks its arguments (throws nexus::Error naming the op) and runs the best kernel of
// `device`, the values split over `pool` when given.
void swiglu(const SwigluArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void swiglu_backward(const SwigluBackwardArgs& a, ThreadPool* pool = nullptr,
                     Device device = Device::cpu());
void gelu(const GeluArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void gelu_backward(const GeluBackwardArgs& a, ThreadPool* pool = nullptr,
                   Device device = Device::cpu());

}  // namespace nexus
