// Per-ISA kernels behind the element-wise ops of ops/elementwise.h (picked by active_isa()).
#pragma once

#include <cstdint>

namespace nexus::cpu {

// g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)).
void swiglu_scalar(float* g, const float* u, int64_t n);
void swiglu_avx2(float* g, const float* u, int64_t n);

// y = x / sqrt(mean(x^2) + eps) * w per row (w may be null); the sum of squares in double.
void rms_norm_scalar(const float* x, const float* w, float eps, float* y, int64_t rows,
                     int64_t dim);
void rms_norm_avx2(const float* x, const float* w, float eps, float* y, int64_t rows,
                   int64_t dim);

// dst[i] = src[i]; block_max[b] = the largest of src[b * 64 .. b * 64 + 63] (the last block may be
// shorter); returns false when some src[i] is NaN or +inf (the copy is made all the same). No copy
// when dst is null.
bool copy_block_max_scalar(const float* src, float* dst, int64_t n, float* block_max);
bool copy_block_max_avx2(const float* src, float* dst, int64_t n, float* block_max);

}  // namespace nexus::cpu
