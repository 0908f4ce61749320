// CPU activation kernels (backends/api/activation.h): SwiGLU and GPT-2's tanh GELU, forward and
// backward. The scalar loops are the references; the AVX2 ones (activation_avx2.cc) use a
// vectorised exp (relative error ~2e-7). Work is split over the pool in ranges aligned to the SIMD
// step, so a vector body never straddles two threads and results do not depend on the thread count.
#include "backends/cpu/activation.h"

#include <cmath>

#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {

void swiglu_forward_scalar(float* out, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void swiglu_backward_scalar(float* dg, float* du, const float* dout, const float* g, const float* u,
                            int64_t n) {
  // silu(g) = g s with s = sigmoid(g); silu'(g) = s (1 + g (1 - s)).
  for (int64_t i = 0; i < n; ++i) {
    const float sg = 1.0f / (1.0f + std::exp(-g[i]));
    dg[i] = dout[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
    du[i] = dout[i] * g[i] * sg;
  }
}

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

void gelu_forward_scalar(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void gelu_backward_scalar(float* dx, const float* dout, const float* x, int64_t n) {
  // gelu(v) = v/2 (1 + tanh z), z = C (v + A v^3):
  // gelu'(v) = (1 + tanh z) / 2 + v/2 (1 - tanh^2 z) C (1 + 3 A v^2).
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    const float d =
        0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = dout[i] * d;
  }
}

namespace {

// Values per thread at least: below that a hand-off costs more than the loop.
constexpr int64_t kMinPerThread = 4096;

template <void (*fn)(float*, const float*, const float*, int64_t)>
void swiglu_forward(const SwigluArgs& a, ThreadPool* pool) {
  par::for_aligned(pool, a.n, kMinPerThread,
                   [&](int64_t i0, int64_t i1) { fn(a.out + i0, a.g + i0, a.u + i0, i1 - i0); });
}

template <void (*fn)(float*, float*, const float*, const float*, const float*, int64_t)>
void swiglu_backward(const SwigluBackwardArgs& a, ThreadPool* pool) {
  par::for_aligned(pool, a.n, kMinPerThread, [&](int64_t i0, int64_t i1) {
    fn(a.dg + i0, a.du + i0, a.dout + i0, a.g + i0, a.u + i0, i1 - i0);
  });
}

template <void (*fn)(float*, const float*, int64_t)>
void gelu_forward(const GeluArgs& a, ThreadPool* pool) {
  par::for_aligned(pool, a.n, kMinPerThread,
                   [&](int64_t i0, int64_t i1) { fn(a.out + i0, a.x + i0, i1 - i0); });
}

template <void (*fn)(float*, const float*, const float*, int64_t)>
void gelu_backward(const GeluBackwardArgs& a, ThreadPool* pool) {
  par::for_aligned(pool, a.n, kMinPerThread,
                   [&](int64_t i0, int64_t i1) { fn(a.dx + i0, a.dout + i0, a.x + i0, i1 - i0); });
}

const KernelVariant<SwigluArgs> kSwiglu[] = {
    {"avx2", avx2_active, swiglu_forward<swiglu_forward_avx2>},
    {"scalar", always_available, swiglu_forward<swiglu_forward_scalar>}};
const KernelVariant<SwigluBackwardArgs> kSwigluBack[] = {
    {"avx2", avx2_active, swiglu_backward<swiglu_backward_avx2>},
    {"scalar", always_available, swiglu_backward<swiglu_backward_scalar>}};
const KernelVariant<GeluArgs> kGelu[] = {
    {"avx2", avx2_active, gelu_forward<gelu_forward_avx2>},
    {"scalar", always_available, gelu_forward<gelu_forward_scalar>}};
const KernelVariant<GeluBackwardArgs> kGeluBack[] = {
    {"avx2", avx2_active, gelu_backward<gelu_backward_avx2>},
    {"scalar", always_available, gelu_backward<gelu_backward_scalar>}};

}  // namespace

KernelVariants<SwigluArgs> swiglu_kernels() { return kSwiglu; }
KernelVariants<SwigluBackwardArgs> swiglu_backward_kernels() { return kSwigluBack; }
KernelVariants<GeluArgs> gelu_kernels() { return kGelu; }
KernelVariants<GeluBackwardArgs> gelu_backward_kernels() { return kGeluBack; }

}  // namespace nexus::cpu
