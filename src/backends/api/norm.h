// Arguments of the normalisation ops, shared by the front-ends (ops/norm.h) and every backend.
// Rows are f32 [rows x dim], row-major. Backward ops add into their gradients (+=).
#pragma once

#include <cstdint>

namespace nexus {

// y = x / sqrt(mean(x^2) + eps) * w per row; rstd[r] = that 1/rms when rstd is not null.
// y may alias x.
struct RmsNormArgs {
  const float* x;
  const float* w;
  float eps;
  float* y;
  float* rstd;  // [rows] or null
  int64_t rows, dim;
};

// dx += d/dx and dw += d/dw of sum(dy * y) for the forward above (its rstd).
struct RmsNormBackwardArgs {
  float* dx;
  float* dw;
  const float* dy;
  const float* x;
  const float* w;
  const float* rstd;
  int64_t rows, dim;
};

// y = (x - mean) / sqrt(var + eps) * w + b per row (biased variance, as torch's LayerNorm);
// mean[r] and rstd[r] saved when not null. y may alias x.
struct LayerNormArgs {
  const float* x;
  const float* w;
  const float* b;
  float eps;
  float* y;
  float* mean;  // [rows] or null
  float* rstd;  // [rows] or null
  int64_t rows, dim;
};

struct LayerNormBackwardArgs {
  float* dx;
  float* dw;
  float* db;
  const float* dy;
  const float* x;
  const float* w;
  const float* mean;
  const float* rstd;
  int64_t rows, dim;
};

}  // namespace nexus
