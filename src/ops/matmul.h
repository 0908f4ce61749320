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

// Bytes matmul takes from the scratch arena for this weight and token count (before alignment).
size_t matmul_scratch_bytes(const Tensor& w, int64_t n_tokens);

}  // namespace nexus
