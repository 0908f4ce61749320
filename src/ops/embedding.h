// Token embedding, forward (a gather of table rows of any computable dtype, as f32) and backward
// (the scatter-add into an f32 table gradient), for inference and training alike.
#pragma once

#include <cstdint>
#include <span>

#include "backends/api/embedding.h"
#include "backends/cpu/embedding.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "nexus/tensor.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<EmbeddingArgs> {
  static constexpr const char* kName = "embedding";
  static KernelVariants<EmbeddingArgs> cpu() { return cpu::embedding_kernels(); }
  static KernelVariants<EmbeddingArgs> cuda() { return cuda::embedding_kernels(); }
};
template <>
struct OpKernels<EmbeddingBackwardArgs> {
  static constexpr const char* kName = "embedding_backward";
  static KernelVariants<EmbeddingBackwardArgs> cpu() { return cpu::embedding_backward_kernels(); }
  static KernelVariants<EmbeddingBackwardArgs> cuda() { return cuda::embedding_backward_kernels(); }
};

// Check their arguments (an id outside [0, vocab) throws nexus::Error naming the id, its position
// and the vocab size; on a device, whose ids the host cannot read, the kernel checks them) and run
// the device's kernel.
void embedding(const EmbeddingArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
void embedding_backward(const EmbeddingBackwardArgs& a, ThreadPool* pool = nullptr,
                        Device device = Device::cpu());

// out[i, :] = table[ids[i], :] as f32, for a 2-D table {vocab, dim}; out holds ids.size() * dim
// floats (the forward pass's call, from a weight Tensor).
void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out);

}  // namespace nexus
