// The fused cross-entropy on CUDA: a block per row of logits, which stay on the device (only the
// per-row losses travel, n floats). Max, sum of exponentials and the gradient are three passes
// over the row; with mixed precision the row is rounded before and its gradient after, as on the
// CPU. Targets live on the device, so they are checked there: the first row whose target is not
// below the class count is reported after the launch with the CPU's message.
#include <climits>
#include <cmath>

#include "backends/cuda/half.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

__device__ unsigned long long g_bad_row;  // the lowest row with a target >= v

__global__ void cross_entropy_rows(float* logits, float* row_loss, const int32_t* targets,
                                   int64_t v, float scale, Precision round) {
  float* row = logits + blockIdx.x * v;
  const int32_t t = targets[blockIdx.x];
  if (t >= v && threadIdx.x == 0)
    atomicMin(&g_bad_row, static_cast<unsigned long long>(blockIdx.x));
  if (t < 0 || t >= v) {  // an ignored row: no loss, a zero gradient
    for (int64_t i = threadIdx.x; i < v; i += kThreads) row[i] = 0.0f;
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0f;
    return;
  }
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < v; i += kThreads) {
    const float x = round_16(row[i], round);
    row[i] = x;
    m = fmaxf(m, x);
  }
  m = block_max(m);  // its barrier also makes every rounded value visible
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < v; i += kThreads) s += expf(row[i] - m);
  s = block_sum(s);
  const float xt = row[t];
  __syncthreads();  // row[t] is read before its thread overwrites it
  if (threadIdx.x == 0) row_loss[blockIdx.x] = m + logf(s) - xt;
  const float inv = 1.0f / s;
  for (int64_t i = threadIdx.x; i < v; i += kThreads) {
    const float g = expf(row[i] - m) * inv - (i == t ? 1.0f : 0.0f);
    row[i] = round_16(g * scale, round);
  }
}

void cross_entropy(const CrossEntropyArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  const unsigned long long none = ULLONG_MAX;
  cudaMemcpyToSymbol(g_bad_row, &none, sizeof(none));
  cross_entropy_rows<<<static_cast<unsigned>(a.n), kThreads>>>(a.logits, a.row_loss, a.targets, a.v,
                                                               a.scale, a.round);
  finish("cross_entropy");
  unsigned long long bad = none;
  cudaMemcpyFromSymbol(&bad, g_bad_row, sizeof(bad));
  if (bad == none) return;
  int32_t target = 0;
  cudaMemcpy(&target, a.targets + bad, sizeof(target), cudaMemcpyDeviceToHost);
  throw Error("[cross_entropy] target " + std::to_string(target) + " of row " +
              std::to_string(bad) + " is not below the " + std::to_string(a.v) + " classes");
}

const KernelVariant<CrossEntropyArgs> kCrossEntropy[] = {{"cuda", device_present, cross_entropy}};

}  // namespace

KernelVariants<CrossEntropyArgs> cross_entropy_kernels() { return kCrossEntropy; }

}  // namespace nexus::cuda
