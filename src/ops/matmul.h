// Matrix multiply of f32 activations by a weight matrix of any computable dtype (float or
// block-quantized): the linear layers of every model go through here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "nexus/tensor.h"

namespace nexus {

// y[t, r] = sum_k x[t, k] * W[r, k] for t < n_tokens; W is a 2-D weight Tensor {rows, k} of any
// dtype with CPU kernels or Q4_0x8 (Q4_0 repacked at load, backends/cpu/repack.h), x is f32
// [n_tokens x k] row-major, y is f32 [n_tokens x rows].
// Activations are converted once into `scratch` (cpu::vec_dot_type of W's dtype; nothing is taken
// for F32/F16/BF16 weights), rows are split over the pool's threads. The scratch memory is not
// given back: reset the arena between forward passes. Throws nexus::Error on bad shapes or dtypes.
void matmul(const Tensor& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Arena& scratch);

// One output of matmul_group: y = x W^T for weight w (shapes as for matmul).
struct MatmulOut {
  const Tensor* w;
  float* y;
};

// Several matmuls of the same activations (Q, K and V; gate and up), each equal to matmul(). For
// a few tokens (decode) they run as one parallel region: the activations are converted once per
// dot type and the rows of all the weights are split over the threads together, so a step pays
// one thread hand-off instead of one per weight. Many tokens go through matmul() one by one.
void matmul_group(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                  ThreadPool& pool, Arena& scratch);

// Bytes matmul takes from the scratch arena for this weight and token count (before alignment).
size_t matmul_scratch_bytes(const Tensor& w, int64_t n_tokens);
// The same for matmul_group (at most the sum over its weights).
size_t matmul_group_scratch_bytes(const MatmulOut* outs, int count, int64_t n_tokens);

}  // namespace nexus
