// Causal self-attention that keeps its probabilities for the backward: the training pass's
// attention (inference's, over the KV cache, is ops/attention.h). Arguments in
// backends/api/attention.h.
#pragma once

#include <cstdint>

#include "backends/api/attention.h"
#include "backends/cpu/attention_train.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<CausalAttentionArgs> {
  static constexpr const char* kName = "causal_attention";
  static KernelVariants<CausalAttentionArgs> cpu() { return cpu::causal_attention_kernels(); }
  static KernelVariants<CausalAttentionArgs> cuda() { return cuda::causal_attention_kernels(); }
};
template <>
struct OpKernels<CausalAttentionBackwardArgs> {
  static constexpr const char* kName = "causal_attention_backward";
  static KernelVariants<CausalAttentionBackwardArgs> cpu() {
    return cpu::causal_attention_backward_kernels();
  }
  static KernelVariants<CausalAttentionBackwardArgs> cuda() {
    return cuda::causal_attention_backward_kernels();
  }
};

// out [b*t, n_heads*hd] = softmax(q k^T / sqrt(hd), causal) v; saves the probabilities in
// att [b, n_heads, t, t]. (sequence, head) pairs are split over the pool's threads; the results
// are the same for any thread count.
// On a device other than the CPU every pointer lives there.
void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, ThreadPool* pool = nullptr,
                       Device device = Device::cpu());
// Floats of attention_backward scratch per thread for sequences of t tokens (t * t + t).
int64_t attention_backward_scratch(int64_t t);
// Writes dq, dk, dv (what they held is not read); `scratch` holds attention_backward_scratch(t)
// floats per thread of `pool` (for one thread when it is null). Work is split by (sequence, KV
// head), so no two threads write the same dk / dv row. A device other than the CPU takes no
// scratch (null is fine).
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* att,
                        const float* q, const float* k, const float* v, const AttnShape& s,
                        float* scratch, ThreadPool* pool = nullptr, Device device = Device::cpu());

}  // namespace nexus
