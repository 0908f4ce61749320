// Our f32 GEMM for AVX-512 CPUs, used by the training GEMMs in place of OpenBLAS's sgemm where it
// is active. Row-major, like cblas_sgemm with alpha 1, on the calling thread:
//   C[m x n] = (accumulate ? C : 0) + A[m x k] op(B)[k x n],
// A[i * lda + p]; op(B) = B[p * ldb + j] (trans_b false) or B^T, B[j * ldb + p] (trans_b true).
//
// How (docs/KERNELS.md, "Training f32 GEMM"): a 12 x 32 register tile (24 zmm accumulators), A
// broadcast from a 12-row copy that stays in L1, op(B) packed into 32-column panels of up to 768 k
// (transposed in 16 x 16 register blocks when trans_b) in L2, C written once per 768 k, and the
// next 12 rows of A prefetched while the current ones compute. Each element of C is summed over p
// in increasing order, in blocks of 768, whatever m and the caller's split of rows or columns: the
// result does not depend on the threads. It is not OpenBLAS's summation order, so results differ
// from sgemm's in the last bits (within f32 accumulation rounding).
#pragma once

#include <cstdint>

namespace nexus::cpu {

// The AVX-512 kernels active (quant.h: avx512_active) and NEXUS_NO_F32_GEMM not set to 1.
// Decided once.
bool gemm_f32_avx512_active();

// The multiply above. Any m, n, k >= 1; call only when gemm_f32_avx512_active(). Uses a per-thread
// packing buffer of 768 KiB, allocated on the thread's first call.
void gemm_f32_avx512(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace nexus::cpu
