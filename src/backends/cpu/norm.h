// CPU kernels of the normalisation ops: the variant tables the op front-ends (ops/norm.h) and the
// op test use, and the rows they are built from (scalar references, AVX2 versions with the same
// bits).
#pragma once

#include <cstdint>

#include "backends/api/kernel.h"
#include "backends/api/norm.h"

namespace nexus::cpu {

KernelVariants<RmsNormArgs> rms_norm_kernels();
KernelVariants<RmsNormBackwardArgs> rms_norm_backward_kernels();
KernelVariants<LayerNormArgs> layer_norm_kernels();
KernelVariants<LayerNormBackwardArgs> layer_norm_backward_kernels();

// One row of c values. The backward rows add into dx and the weight (and bias) gradient rows.
void rmsnorm_forward_row_scalar(float* out, float* rstd, const float* x, const float* w, int64_t c,
                                float eps);
void rmsnorm_forward_row_avx2(float* out, float* rstd, const float* x, const float* w, int64_t c,
                              float eps);
void rmsnorm_backward_row_scalar(float* dx, float* pw, const float* g, const float* x,
                                 const float* w, float r, int64_t c);
void rmsnorm_backward_row_avx2(float* dx, float* pw, const float* g, const float* x, const float* w,
                               float r, int64_t c);
void layernorm_forward_row_scalar(float* out, float* mean, float* rstd, const float* x,
                                  const float* w, const float* b, int64_t c, float eps);
void layernorm_forward_row_avx2(float* out, float* mean, float* rstd, const float* x,
                                const float* w, const float* b, int64_t c, float eps);
void layernorm_backward_row_scalar(float* dx, float* pw, float* pb, const float* g, const float* x,
                                   const float* w, float m, float r, int64_t c);
void layernorm_backward_row_avx2(float* dx, float* pw, float* pb, const float* g, const float* x,
                                 const float* w, float m, float r, int64_t c);

}  // namespace nexus::cpu
