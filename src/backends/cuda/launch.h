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

inline bool device_present() { return static_cast<bool>(init()); }

inline void finish(const char* op) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) throw Error(std::string("[") + op + "] CUDA: " + cudaGetErrorString(e));
}

}  // namespace nexus::cuda
