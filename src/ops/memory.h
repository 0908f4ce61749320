// The compressive memory op (Infini-attention's long-term memory; arguments and equations in
// backends/api/memory.h), forward and backward. Front-ends check the shapes, open a profiler span
// and run the device's first variant.
#pragma once

#include "backends/api/memory.h"
#include "backends/cpu/memory.h"
#include "nexus/core/thread_pool.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<MemoryArgs> {
  static constexpr const char* kName = "memory";
  static KernelVariants<MemoryArgs> cpu() { return cpu::memory_kernels(); }
};
template <>
struct OpKernels<MemoryBackwardArgs> {
  static constexpr const char* kName = "memory_backward";
  static KernelVariants<MemoryBackwardArgs> cpu() { return cpu::memory_backward_kernels(); }
};

template <>
struct OpKernels<TitansArgs> {
  static constexpr const char* kName = "titans_memory";
  static KernelVariants<TitansArgs> cpu() { return cpu::titans_kernels(); }
};
template <>
struct OpKernels<TitansBackwardArgs> {
  static constexpr const char* kName = "titans_memory_backward";
  static KernelVariants<TitansBackwardArgs> cpu() { return cpu::titans_backward_kernels(); }
};

template <>
struct OpKernels<TitansMlpArgs> {
  static constexpr const char* kName = "titans_mlp_memory";
  static KernelVariants<TitansMlpArgs> cpu() { return cpu::titans_mlp_kernels(); }
};
template <>
struct OpKernels<TitansMlpBackwardArgs> {
  static constexpr const char* kName = "titans_mlp_memory_backward";
  static KernelVariants<TitansMlpBackwardArgs> cpu() { return cpu::titans_mlp_backward_kernels(); }
};

void titans_forward(const TitansArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void titans_backward(const TitansBackwardArgs& a, ThreadPool* pool = nullptr,
                     Device device = Device::cpu());

void titans_mlp_forward(const TitansMlpArgs& a, ThreadPool* pool = nullptr,
                        Device device = Device::cpu());
void titans_mlp_backward(const TitansMlpBackwardArgs& a, ThreadPool* pool = nullptr,
                         Device device = Device::cpu());

void memory_forward(const MemoryArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void memory_backward(const MemoryBackwardArgs& a, ThreadPool* pool = nullptr,
                     Device device = Device::cpu());

}  // namespace nexus
