// The W8A8 leg of nexus::matmul: int8 activations per token (or at a calibrated scale) times a
// W8A8 weight's int8 rows (backends/cpu/gemm_w8a8.h), for any token count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/matmul.h"

namespace nexus {

// y = x W^T for each output (every weight DType::kW8A8, all of width k): x is quantized once per
// distinct activation scale of the weights (dynamic ones share one), then the sixteen-row groups
// of all the weights are split over the pool together. Shapes are checked by the caller.
void matmul_w8a8(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                 ThreadPool& pool, Arena& scratch);

// Bytes matmul_w8a8 takes from the scratch arena for one weight of width k (before alignment).
size_t matmul_w8a8_scratch_bytes(int64_t k, int64_t n_tokens);

}  // namespace nexus
