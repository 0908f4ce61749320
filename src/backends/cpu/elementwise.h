// CPU kernels of the element-wise ops without a backward (ops/elementwise.h is their front-end;
// the norms and activations are in norm.h and activation.h); f32 row-major [rows x dim].
#pragma once

#include <cstdint>

namespace nexus::cpu {

// y[r, :] += b for every row.
void add_bias(float* y, const float* b, int64_t rows, int64_t dim);
// y += x over n values.
void add_inplace(float* y, const float* x, int64_t n);

// Entries per block of copy_block_max.
inline constexpr int64_t kBlockMaxEntries = 64;
// dst = src and the largest value of each kBlockMaxEntries block (ops/elementwise.h).
bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max);

}  // namespace nexus::cpu
