// What every CUDA kernel file shares (included by .cu files only): the block size, the variants'
// availability check, and the end of a launch: wait for it and turn a CUDA error into
// nexus::Error naming the op. The variants wait so that an op's result is there when it returns,
// as on the CPU; a stream per step and CUDA graphs will take that wait out of the step.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda.h"
#include "nexus/status.h"

namespace nexus::cuda {

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (at least one, at most 65535 x 8 per launch).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// The sum (max) of v over a block of kThreads threads, every thread getting it; warp shuffles,
// then one shared-memory step in a fixed order.
template <bool kMax>
__device__ inline float block_reduce(float v) {
  __shared__ float part[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float s = part[0];
  for (int i = 1; i < kThreads / 32; ++i) s = kMax ? fmaxf(s, part[i]) : s + part[i];
  __syncthreads();  // part is reused by the next call
  return s;
}
__device__ inline float block_sum(float v) { return block_reduce<false>(v); }
__device__ inline float block_max(float v) { return block_reduce<true>(v); }

inline bool device_present() { return static_cast<bool>(init()); }

inline void finish(const char* op) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) throw Error(std::string("[") + op + "] CUDA: " + cudaGetErrorString(e));
}

}  // namespace nexus::cuda
