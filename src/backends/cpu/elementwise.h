// CPU kernels of the element-wise ops (ops/elementwise.h is their front-end): each picks its ISA
// variant at run time; inputs are f32 row-major [rows x dim].
#pragma once

#include <cstdint>

namespace nexus::cpu {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null = all ones). y may alias x.
void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim);
// y = (x - mean) / sqrt(var + eps) * w + b. y may alias x.
void layer_norm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                int64_t dim);
// g = silu(g) * u, elementwise over n values.
void swiglu(float* g, const float* u, int64_t n);
// x = gelu(x) with GPT-2's tanh approximation.
void gelu_tanh(float* x, int64_t n);
// y[r, :] += b for every row.
void add_bias(float* y, const float* b, int64_t rows, int64_t dim);
// y += x over n values.
void add_inplace(float* y, const float* x, int64_t n);

// Entries per block of copy_block_max.
inline constexpr int64_t kBlockMaxEntries = 64;
// dst = src and the largest value of each kBlockMaxEntries block (ops/elementwise.h).
bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max);

}  // namespace nexus::cpu
