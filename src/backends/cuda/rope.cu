// RoPE on CUDA: a thread per (row, head, pair) rotates that pair in place, the CPU scalar
// reference's formula (backends/cpu/rope.cc) for both styles and the inverse rotation.
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

__global__ void rope_pairs(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t half,
                           bool neox, const float* cs, int64_t cs_rows, float sign) {
  const int64_t total = rows * n_heads * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % half, rh = t / half, r = rh / n_heads;
    float* v = x + rh * head_dim;
    const float* c = cs + (r % cs_rows) * half * 2;
    const float co = c[2 * i], si = sign * c[2 * i + 1];
    const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * co - x1 * si;
    v[b] = x0 * si + x1 * co;
  }
}

void rope(const RopeArgs& a, ThreadPool*) {
  const int64_t half = a.rope_dim / 2;
  if (a.rows == 0 || half == 0) return;
  rope_pairs<<<blocks_for(a.rows * a.n_heads * half), kThreads>>>(
      a.x, a.rows, a.n_heads, a.head_dim, half, a.style == RopeStyle::kNeox, a.cs, a.cs_rows,
      a.inverse ? -1.0f : 1.0f);
  finish("rope");
}

const KernelVariant<RopeArgs> kRope[] = {{"cuda", device_present, rope}};

}  // namespace

KernelVariants<RopeArgs> rope_kernels() { return kRope; }

}  // namespace nexus::cuda
