// Our f32 GEMM for AVX-512 CPUs, used by the training GEMMs in place of OpenBLAS's sgemm where it
// is active. Row-major, like cblas_sgemm with alpha 1, on the calling thread:
//   C[m x n] = (accumulate ? C : 0) + op(A)[m x k] op(B)[k x n],
// op(A) = A (trans_a false: A[i * lda + p]) or A^T (A[p * lda + i]), likewise op(B).
//
// How (docs/KERNELS.md, "Training f32 GEMM"): a 12 x 32 register tile (24 zmm accumulators) on
// k-major panels: op(A) packed into 12-row panels once a pass of up to 768 k, op(B) into 32-column
// panels in blocks of 256 columns (L2), transposes done in 16 x 16 register blocks; C is read and
// written once a pass. Each element of C is summed over p in increasing order, in passes of 768,
// whatever m and the caller's split of rows or columns: the result does not depend on the
// threads. It is not OpenBLAS's summation order, so results differ from sgemm's in the last bits
// (within f32 accumulation rounding).
#pragma once

#include <cstdint>

namespace nexus::cpu {

// The AVX-512 kernels active (quant.h: avx512_active) and NEXUS_NO_F32_GEMM not set to 1.
// Decided once.
bool gemm_f32_avx512_active();

// The multiply above. Any m, n, k >= 1; call only when gemm_f32_avx512_active(). Uses per-thread
// packing buffers, kept for the thread's life: 768 KiB for op(B) and m x 768 floats for op(A)
// (the training's largest, a d weight call of 1024 rows at 768 k: 3 MiB).
// With trans_a and row_sums not null it also adds each row's sum of op(A) to row_sums:
// row_sums[i] += sum over p of A[p * lda + i], p increasing, one pass of 768 at a time (a bias's
// gradient, summed as op(A) is packed: dout^T of a d weight GEMM).
// With trans_c, C is held transposed: C(i, j) at c[j * ldc + i] (an [n x m] row-major matrix that
// receives op(A) op(B) transposed), the same bits as without. The tile's 12 x 32 result is
// transposed in registers on its way out: a d weight computed as inp^T dout lands in dw's own
// [oc x c] layout (train_ops.cc says when that pays).
void gemm_f32_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                     int64_t ldc, float* row_sums = nullptr, bool trans_c = false);

}  // namespace nexus::cpu
