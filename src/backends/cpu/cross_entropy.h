// CPU kernels of the fused cross-entropy (backends/api/loss.h): the variant tables, one row kernel
// each (AVX-512 and AVX2 give the same bits; the scalar reference sums in double).
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/loss.h"

namespace nexus::cpu {

KernelVariants<CrossEntropyArgs> cross_entropy_kernels();

}  // namespace nexus::cpu
