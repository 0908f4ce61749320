// Matrix multiply of f32 activations by a weight matrix of any computable dtype (float or
// block-quantized): the linear layers of every model go through here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"
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

// Sees the activations of every matmul and matmul_group weight before it is multiplied (x is f32
// [n_tokens x k]; `nexus imatrix` sums their squares per column). Called on the caller's thread.
class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  virtual void observe(const Tensor& w, const float* x, int64_t n_tokens) = 0;
};
// One observer for the process (nullptr: none, the default; the hot path pays one load).
void set_matmul_observer(MatmulObserver* observer);

// One output of matmul_group: y = x W^T for weight w (shapes as for matmul).
struct MatmulOut {
  const Tensor* w;
  float* y;
};

// Several matmuls of the same activations (Q, K and V; gate and up), each equal to matmul(). The
// weights on the dot kernels run as one parallel region: the activations are converted once per
// dot type and the rows of all the weights are split over the threads together, so a decode step
// pays one thread hand-off instead of one per weight. Weights on sgemm go one by one.
void matmul_group(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                  ThreadPool& pool, Arena& scratch);

// Where thread `thread` of `n_threads` starts in matmul_group's split of these weights' rows
// (ThreadPool::steal_for's shares of the eight-row units): weight index and byte offset from
// its row 0; {count, 0} when that share is empty.
struct MatmulShareStart {
  int weight;
  size_t offset;
};
MatmulShareStart matmul_group_share_start(const Tensor* const* w, int count, int n_threads,
                                          int thread);

// Asks each worker of the pool to prefetch, while it waits for work
// (ThreadPool::prefetch_while_idle), the first `bytes` of its share of these weights as
// matmul_group splits them for n_tokens tokens: called before the serial work that precedes
// that matmul_group. Nothing when that matmul_group would run on the caller alone or on sgemm.
void matmul_group_prefetch(const Tensor* const* w, int count, int64_t n_tokens, ThreadPool& pool,
                           size_t bytes);

// True when matmul multiplies this weight type by n_tokens f32 activation rows with a packed f32
// GEMM (cpu::gemm_rows_blas: our AVX2 GEMM for F32/F16/BF16 where cpu::prefill_on_our_gemm, else
// OpenBLAS sgemm on weights expanded to f32 panels): from cpu::kBlasMinTokens tokens on, except for
// the repacked layouts (Q4_0x8, Q8_0x8, Q5_0x8, Q4_Kx8, Q6_Kx8). Otherwise it runs the type's dot
// kernels on activations converted to cpu::vec_dot_type (8-bit for the block types), at any token
// count: the repacked layouts' integer kernels beat sgemm on f32 panels at prefill too (over 2x for
// Q4_0; docs/KERNELS.md), while the other block types' dot loops do not.
bool matmul_on_blas(DType w, int64_t n_tokens);

// Bytes matmul takes from the scratch arena for this weight and token count (before alignment).
size_t matmul_scratch_bytes(const Tensor& w, int64_t n_tokens);
// The same for matmul_group (at most the sum over its weights).
size_t matmul_group_scratch_bytes(const MatmulOut* outs, int count, int64_t n_tokens);

}  // namespace nexus
