// SwiGLU and GPT-2's tanh GELU on CUDA, forward and backward: grid-stride loops over the elements,
// the CPU scalar references' formulas (backends/cpu/activation.cc) with the device's expf and
// tanhf (within a few ulp of the host's).
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

#define NEXUS_GRID_LOOP(i, n)                                                            \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void swiglu_fwd(float* out, const float* g, const float* u, int64_t n) {
  NEXUS_GRID_LOOP(i, n) {
    const float gv = g[i];
    out[i] = gv / (1.0f + expf(-gv)) * u[i];
  }
}

// silu(g) = g s with s = sigmoid(g); silu'(g) = s (1 + g (1 - s)). Inputs are read before either
// output is written (an output may alias an input of the same index).
__global__ void swiglu_bwd(float* dg, float* du, const float* dout, const float* g, const float* u,
                           int64_t n) {
  NEXUS_GRID_LOOP(i, n) {
    const float gv = g[i], uv = u[i], d = dout[i];
    const float s = 1.0f / (1.0f + expf(-gv));
    dg[i] = d * uv * s * (1.0f + gv * (1.0f - s));
    du[i] = d * gv * s;
  }
}

__global__ void gelu_fwd(float* out, const float* x, int64_t n) {
  NEXUS_GRID_LOOP(i, n) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * v * v * v)));
  }
}

__global__ void gelu_bwd(float* dx, const float* dout, const float* x, int64_t n) {
  NEXUS_GRID_LOOP(i, n) {
    const float v = x[i];
    const float th = tanhf(kGeluC * (v + kGeluA * v * v * v));
    dx[i] = dout[i] * (0.5f * (1.0f + th) +
                       0.5f * v * (1.0f - th * th) * kGeluC * (1.0f + 3.0f * kGeluA * v * v));
  }
}

void swiglu(const SwigluArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  swiglu_fwd<<<blocks_for(a.n), kThreads>>>(a.out, a.g, a.u, a.n);
  finish("swiglu");
}
void swiglu_backward(const SwigluBackwardArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  swiglu_bwd<<<blocks_for(a.n), kThreads>>>(a.dg, a.du, a.dout, a.g, a.u, a.n);
  finish("swiglu_backward");
}
void gelu(const GeluArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  gelu_fwd<<<blocks_for(a.n), kThreads>>>(a.out, a.x, a.n);
  finish("gelu");
}
void gelu_backward(const GeluBackwardArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  gelu_bwd<<<blocks_for(a.n), kThreads>>>(a.dx, a.dout, a.x, a.n);
  finish("gelu_backward");
}

const KernelVariant<SwigluArgs> kSwiglu[] = {{"cuda", device_present, swiglu}};
const KernelVariant<SwigluBackwardArgs> kSwigluBackward[] = {
    {"cuda", device_present, swiglu_backward}};
const KernelVariant<GeluArgs> kGelu[] = {{"cuda", device_present, gelu}};
const KernelVariant<GeluBackwardArgs> kGeluBackward[] = {{"cuda", device_present, gelu_backward}};

}  // namespace

KernelVariants<SwigluArgs> swiglu_kernels() { return kSwiglu; }
KernelVariants<SwigluBackwardArgs> swiglu_backward_kernels() { return kSwigluBackward; }
KernelVariants<GeluArgs> gelu_kernels() { return kGelu; }
KernelVariants<GeluBackwardArgs> gelu_backward_kernels() { return kGeluBackward; }

}  // namespace nexus::cuda
