// CPU kernels of the activation ops: the variant tables the op front-ends (ops/activation.h) and
// the op test use, and the loops they are built from (scalar references, AVX2 versions).
#pragma once

#include <cstdint>

#include "backends/api/activation.h"
#include "backends/api/kernel.h"

namespace nexus::cpu {

KernelVariants<SwigluArgs> swiglu_kernels();
KernelVariants<SwigluBackwardArgs> swiglu_backward_kernels();
KernelVariants<GeluArgs> gelu_kernels();
KernelVariants<GeluBackwardArgs> gelu_backward_kernels();

void swiglu_forward_scalar(float* out, const float* g, const float* u, int64_t n);
void swiglu_forward_avx2(float* out, const float* g, const float* u, int64_t n);
// silu(g) = g s with s = sigmoid(g); silu'(g) = s (1 + g (1 - s)).
void swiglu_backward_scalar(float* dg, float* du, const float* dout, const float* g, const float* u,
                            int64_t n);
void swiglu_backward_avx2(float* dg, float* du, const float* dout, const float* g, const float* u,
                          int64_t n);
void gelu_forward_scalar(float* out, const float* x, int64_t n);
void gelu_forward_avx2(float* out, const float* x, int64_t n);
void gelu_backward_scalar(float* dx, const float* dout, const float* x, int64_t n);
void gelu_backward_avx2(float* dx, const float* dout, const float* x, int64_t n);

}  // namespace nexus::cpu
