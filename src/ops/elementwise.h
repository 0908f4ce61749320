// Row-wise and element-wise ops of the forward pass: normalisation, activations, bias, residual.
// Front-ends (profiled) of the kernels in backends/cpu/elementwise.h; inputs are f32 row-major
// [rows x dim].
#pragma once

#include <cstdint>

#include "backends/cpu/elementwise.h"
#include "nexus/core/thread_pool.h"

namespace nexus {

// y = x / sqrt(mean(x^2) + eps) * w. y may alias x. (ops/norm.h with no rstd saved.)
void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim);
// y = (x - mean) / sqrt(var + eps) * w + b. y may alias x. (ops/norm.h.)
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
// p[0, n) = 0, split over `pool` above 256 Ki floats (one thread's memset runs at about half of
// what two reach). `streaming`: with non-temporal stores where the CPU has AVX2, for buffers not
// read again soon (a plain memset first reads every line it clears).
void fill_zero(float* p, int64_t n, ThreadPool* pool = nullptr, bool streaming = false);

// Entries per block of copy_block_max.
inline constexpr int64_t kBlockMaxEntries = cpu::kBlockMaxEntries;
// dst = src over n values (a sampler's logits), and block_max[b] = the largest of block b's
// kBlockMaxEntries values (the last block may be shorter; (n + kBlockMaxEntries - 1) /
// kBlockMaxEntries entries). Returns false when some value is NaN or +inf: the caller names it (the
// copy is made anyway). dst may be null: the block maxima and the check only.
bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max);

}  // namespace nexus
