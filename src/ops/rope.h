// Rotary position embedding, forward and backward (the inverse rotation), for inference and
// training alike. Normal style rotates adjacent pairs (x[2i], x[2i+1]) (llama, llama2.c); NeoX
// style rotates (x[i], x[i + rope_dim/2]) (qwen2/3). Angle pos * theta^(-2i/rope_dim).
#pragma once

#include <cstdint>

#include "backends/api/rope.h"
#include "backends/cpu/rope.h"
#include "backends/cuda/kernels.h"
#include "nexus/config.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<RopeArgs> {
  static constexpr const char* kName = "rope";
  static KernelVariants<RopeArgs> cpu() { return cpu::rope_kernels(); }
  static KernelVariants<RopeArgs> cuda() { return cuda::rope_kernels(); }
};

// cs[t][i] = {cos, sin} of pos[t] * theta^(-2i/rope_dim), i < rope_dim/2 (computed in double).
void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs);
// Checks the arguments (throws nexus::Error naming the op) and rotates (backends/api/rope.h).
void rope(const RopeArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());
// The forward pass's call, profiled: the n rows of x (row stride n_heads * head_dim), row t with
// table row t.
void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs);

}  // namespace nexus
