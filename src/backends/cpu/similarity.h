// CPU kernels of the vector search op (backends/api/similarity.h).
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/similarity.h"

namespace nexus::cpu {

// "gemm" (8 or more queries: each block of rows scored as one product on our f32 GEMM), "avx2"
// (four queries share each loaded stretch of a row) and "scalar" (the reference). All split the
// rows into fixed chunks over the pool and merge the chunks' top-k in order, so results do not
// depend on the thread count.
KernelVariants<TopKArgs> topk_kernels();

// Inner products of queries [q0, q1) with rows [r0, r1), written out[(q - q0) * (r1 - r0) + r - r0]
// (similarity_avx2.cc).
void topk_dots_avx2(const TopKArgs& a, int64_t q0, int64_t q1, int64_t r0, int64_t r1, float* out);

}  // namespace nexus::cpu
