// The dense f32 layer, forward and backward: row-major activations times a GGUF [out, in] f32
// weight (torch's x W^T), with the bias and a residual folded in. The training pass's projections
// and output head. Arguments in backends/api/dense.h.
#pragma once

#include "backends/api/dense.h"
#include "backends/cpu/dense.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<DenseArgs> {
  static constexpr const char* kName = "dense";
  static KernelVariants<DenseArgs> cpu() { return cpu::dense_kernels(); }
  static KernelVariants<DenseArgs> cuda() { return cuda::dense_kernels(); }
};
template <>
struct OpKernels<DenseBackwardArgs> {
  static constexpr const char* kName = "dense_backward";
  static KernelVariants<DenseBackwardArgs> cpu() { return cpu::dense_backward_kernels(); }
  static KernelVariants<DenseBackwardArgs> cuda() { return cuda::dense_backward_kernels(); }
};

// out[n, oc] = add_rows + bias + inp[n, c] w[oc, c]^T. With a pool each thread computes a share of
// the output (rows, or columns for the output head and short batches); every element is summed in
// the same order for any thread count. bf16_operands: every operand holds bf16 values (mixed
// precision's rounded copies), so where the CPU has AMX-BF16 large shares run on its tiles (the
// same exact products, summed in f32 in another order).
void matmul_forward(float* out, const float* inp, const float* w, int64_t n, int64_t c, int64_t oc,
                    ThreadPool* pool = nullptr, bool bf16_operands = false,
                    const float* add_rows = nullptr, const float* bias = nullptr);
// dinp += dout w, dw += dout^T inp, and with dbias the bias gradient (column sums of dout); any of
// the three may be null. A d input whose inner size oc is the vocabulary (oc >= 16 c) is summed in
// fixed chunks of oc, added in chunk order (the same for any thread count).
void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int64_t n, int64_t c, int64_t oc, ThreadPool* pool = nullptr,
                     bool bf16_operands = false, float* dbias = nullptr);
// db += the column sums of dout [n, c], each column summed over its rows in order.
void bias_backward(float* db, const float* dout, int64_t n, int64_t c, ThreadPool* pool = nullptr);

}  // namespace nexus
