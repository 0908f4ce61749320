// CPU kernels of the selective state-space ops (backends/api/ssm.h): the variant tables, and the
// per-sequence/head kernels they split over the pool.
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/ssm.h"

namespace nexus::cpu {

KernelVariants<SsmConvArgs> ssm_conv_kernels();
KernelVariants<SsmConvBackwardArgs> ssm_conv_backward_kernels();
// "chunked": the SSD form (matrix products within chunks, a scan across them) for one decay per
// head; "sequential": the recurrence token by token, the reference.
KernelVariants<SsmScanArgs> ssm_scan_kernels();
KernelVariants<SsmScanBackwardArgs> ssm_scan_backward_kernels();

// Tokens per chunk of the chunked scan.
constexpr int64_t kSsmChunk = 64;

}  // namespace nexus::cpu
