// Scalar reference implementations of the element-wise ops (sums in double for stable norms).
#include "ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/quant.h"
#include "profile/op_args.h"

namespace nexus {

void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim) {
  NEXUS_PROFILE_OP("rms_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
  if (cpu::active_isa() == cpu::Isa::kAvx2)
    cpu::rms_norm_avx2(x, w, eps, y, rows, dim);
  else
    cpu::rms_norm_scalar(x, w, eps, y, rows, dim);
}

void layer_norm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                int64_t dim) {
  NEXUS_PROFILE_OP("layer_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
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
  NEXUS_PROFILE_OP("swiglu", profile::current_layer(), 12 * n, 0, profile::rows_shapes(1, n));
  if (cpu::active_isa() == cpu::Isa::kAvx2)
    cpu::swiglu_avx2(g, u, n);
  else
    cpu::swiglu_scalar(g, u, n);
}

namespace cpu {

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

}  // namespace cpu

void gelu_tanh(float* x, int64_t n) {
  NEXUS_PROFILE_OP("gelu", profile::current_layer(), 8 * n, 0, profile::rows_shapes(1, n));
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
  if (cpu::active_isa() == cpu::Isa::kAvx2) return cpu::copy_block_max_avx2(src, dst, n, block_max);
  return cpu::copy_block_max_scalar(src, dst, n, block_max);
}

}  // namespace nexus
