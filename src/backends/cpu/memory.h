// CPU kernels of the compressive memory op (backends/api/memory.h): the variant tables.
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/memory.h"

namespace nexus::cpu {

// Each (sequence, key/value head) on its own, split over the pool: "gemm" (a segment's rows as
// matrices on our f32 GEMM) and "scalar" (row by row, the reference).
KernelVariants<MemoryArgs> memory_kernels();
KernelVariants<MemoryBackwardArgs> memory_backward_kernels();
// Titans' linear memory (titans.cc): "gemm" and "scalar" (the reference), as above.
KernelVariants<TitansArgs> titans_kernels();
KernelVariants<TitansBackwardArgs> titans_backward_kernels();
// Titans' deep memory (titans_mlp.cc): "gemm" (our f32 GEMM) and "scalar" (plain loops, the
// reference), the same code on different matrix products.
KernelVariants<TitansMlpArgs> titans_mlp_kernels();
KernelVariants<TitansMlpBackwardArgs> titans_mlp_backward_kernels();

}  // namespace nexus::cpu
