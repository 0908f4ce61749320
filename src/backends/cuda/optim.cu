// The optimizer ops on CUDA. AdamW spells out every rounding (__fmul_rn and friends, which nvcc
// never fuses into a multiply-add, and IEEE sqrt and division), so a step gives the CPU's bits;
// the bf16 moments take the same stochastic rounding bits. The sum of squares is deterministic: a
// fixed grid of blocks, each summing a fixed set of elements in double, then one block adding the
// blocks' sums in a fixed tree; only that double comes back to the host.
#include "backends/cuda/half.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

constexpr int kSumBlocks = 1024;
__device__ double g_part[kSumBlocks];
__device__ double g_sum;

__device__ inline uint16_t bf16_stochastic(float f, uint32_t r16) {
  return static_cast<uint16_t>((__float_as_uint(f) + r16) >> 16);
}

template <bool kBf16>
__global__ void adamw_elements(AdamWArgs a) {
  const float a1 = __fsub_rn(1.0f, a.k.b1), a2 = __fsub_rn(1.0f, a.k.b2);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = __fmul_rn(a.g[i], a.k.gscale);
    const float m0 = kBf16 ? decode_16(a.m16[i], Precision::kBF16) : a.m[i];
    const float v0 = kBf16 ? decode_16(a.v16[i], Precision::kBF16) : a.v[i];
    const float mi = __fadd_rn(__fmul_rn(a.k.b1, m0), __fmul_rn(a1, gi));
    const float vi = __fadd_rn(__fmul_rn(a.k.b2, v0), __fmul_rn(__fmul_rn(a2, gi), gi));
    if constexpr (kBf16) {
      const uint32_t r = mix32(a.index0 + static_cast<uint32_t>(i) + a.seed);
      a.m16[i] = bf16_stochastic(mi, r & 0xffffu);
      a.v16[i] = bf16_stochastic(vi, r >> 16);
    } else {
      a.m[i] = mi;
      a.v[i] = vi;
    }
    const float den = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), a.k.inv_bc2_sqrt), a.k.eps);
    a.p[i] = __fsub_rn(__fmul_rn(a.p[i], a.k.keep), __fdiv_rn(__fmul_rn(a.k.step_size, mi), den));
  }
}

// Block b sums elements b, b + kSumBlocks * kThreads, ... per thread, then the block's threads
// in a fixed tree.
__device__ double block_tree_sum(double s) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

__global__ void sum_squares_blocks(const float* g, int64_t n) {
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(kSumBlocks) * kThreads) {
    const double x = g[i];
    s += x * x;
  }
  s = block_tree_sum(s);
  if (threadIdx.x == 0) g_part[blockIdx.x] = s;
}

__global__ void sum_squares_total() {
  double s = 0.0;
  for (int i = threadIdx.x; i < kSumBlocks; i += kThreads) s += g_part[i];
  s = block_tree_sum(s);
  if (threadIdx.x == 0) g_sum = s;
}

__global__ void scale_elements(float* g, int64_t n, float c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    g[i] = __fmul_rn(g[i], c);
}

void adamw(const AdamWArgs& a, ThreadPool*) {
  if (a.m16 != nullptr)
    adamw_elements<true><<<blocks_for(a.n), kThreads>>>(a);
  else
    adamw_elements<false><<<blocks_for(a.n), kThreads>>>(a);
  finish("adamw");
}

void sum_squares(const SumSquaresArgs& a, ThreadPool*) {
  sum_squares_blocks<<<kSumBlocks, kThreads>>>(a.g, a.n);
  sum_squares_total<<<1, kThreads>>>();
  finish("sum_squares");
  const cudaError_t e = cudaMemcpyFromSymbol(a.out, g_sum, sizeof(double));
  if (e != cudaSuccess) throw Error(std::string("[sum_squares] CUDA: ") + cudaGetErrorString(e));
}

void scale(const ScaleArgs& a, ThreadPool*) {
  scale_elements<<<blocks_for(a.n), kThreads>>>(a.g, a.n, a.c);
  finish("scale");
}

const KernelVariant<AdamWArgs> kAdamW[] = {{"cuda", device_present, adamw}};
const KernelVariant<SumSquaresArgs> kSumSquares[] = {{"cuda", device_present, sum_squares}};
const KernelVariant<ScaleArgs> kScale[] = {{"cuda", device_present, scale}};

}  // namespace

KernelVariants<AdamWArgs> adamw_kernels() { return kAdamW; }
KernelVariants<SumSquaresArgs> sum_squares_kernels() { return kSumSquares; }
KernelVariants<ScaleArgs> scale_kernels() { return kScale; }

}  // namespace nexus::cuda
