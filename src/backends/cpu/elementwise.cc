// CPU element-wise kernels: the scalar references (sums in double for stable norms) and the
// dispatch to their AVX2 versions.
#include "backends/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {

void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim) {
  if (active_isa() == Isa::kAvx2)
    rms_norm_avx2(x, w, eps, y, rows, dim);
  else
    rms_norm_scalar(x, w, eps, y, rows, dim);
}

void layer_norm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double mean = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0.0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i) {
      float v = static_cast<float>((xr[i] - mean) * inv);
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

void swiglu(float* g, const float* u, int64_t n) {
  if (active_isa() == Isa::kAvx2)
    swiglu_avx2(g, u, n);
  else
    swiglu_scalar(g, u, n);
}

void rms_norm_scalar(const float* x, const float* w, float eps, float* y, int64_t rows,
                     int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
    if (w) {
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
    } else {
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale;
    }
  }
}

void swiglu_scalar(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

bool copy_block_max_scalar(const float* src, float* dst, int64_t n, float* block_max) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  bool ok = true;
  for (int64_t b = 0; b * kBlockMaxEntries < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlockMaxEntries);
    float m = -kInf;
    for (int64_t i = b * kBlockMaxEntries; i < end; ++i) {
      const float x = src[i];
      ok &= x < kInf;  // false for NaN and +inf
      m = x > m ? x : m;
      if (dst != nullptr) dst[i] = x;
    }
    block_max[b] = m;
  }
  return ok;
}

void gelu_tanh(float* x, int64_t n) {
  constexpr float kC = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kC * (v + 0.044715f * v * v * v)));
  }
}

void add_bias(float* y, const float* b, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] += b[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max) {
  if (active_isa() == Isa::kAvx2) return copy_block_max_avx2(src, dst, n, block_max);
  return copy_block_max_scalar(src, dst, n, block_max);
}

}  // namespace nexus::cpu
