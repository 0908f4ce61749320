// CPU kernels of the selective state-space ops (backends/api/ssm.h): the variant tables, and the
// per-sequence/head kernels they split over the pool.
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/ssm.h"

namespace nexus::cpu {

KernelVariants<SsmConvArgs> ssm_conv_kernels();
KernelVariants<SsmConvBackwardArgs> ssm_conv_backward_kernels();
// "ssd_gemm": the SSD form with its products on the f32 GEMM, chunks in parallel (ssm_ssd_avx2.cc);
// "chunked": the SSD form (matrix products within chunks, a scan across them) for one decay per
// head; "sequential": the recurrence token by token, the reference.
KernelVariants<SsmScanArgs> ssm_scan_kernels();
KernelVariants<SsmScanBackwardArgs> ssm_scan_backward_kernels();

// The AVX2/FMA builds of the kernels (ssm_avx2.cc).
void ssm_conv_avx2(const SsmConvArgs& a, ThreadPool* pool);
void ssm_conv_backward_avx2(const SsmConvBackwardArgs& a, ThreadPool* pool);
void ssm_scan_chunked_avx2(const SsmScanArgs& a, ThreadPool* pool);
void ssm_scan_sequential_avx2(const SsmScanArgs& a, ThreadPool* pool);
void ssm_scan_backward_avx2(const SsmScanBackwardArgs& a, ThreadPool* pool);
void ssm_scan_backward_chunked_avx2(const SsmScanBackwardArgs& a, ThreadPool* pool);
void ssm_scan_ssd_gemm(const SsmScanArgs& a, ThreadPool* pool);
void ssm_scan_backward_ssd_gemm(const SsmScanBackwardArgs& a, ThreadPool* pool);

}  // namespace nexus::cpu
