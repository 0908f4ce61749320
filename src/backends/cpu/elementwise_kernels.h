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

}  // namespace nexus::cpu
