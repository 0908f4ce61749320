// Token embeddings on CUDA for F32 and F16 tables: the forward gathers rows (a thread per output
// value) and checks the ids on the device, since they live there: the first id outside the vocab
// is reported by position and value after the launch, as the CPU's front-end reports it. The
// backward adds each row's gradient to its token's row with a thread per column walking the
// positions in order, so repeated ids add up in the CPU's order (no atomics).
#include <cuda_fp16.h>

#include <climits>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

__device__ unsigned long long g_bad_position;  // the lowest position of an id outside the vocab

template <bool kF16>
__global__ void gather(float* out, const void* table, int64_t vocab, int64_t dim,
                       const int32_t* ids, int64_t n) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n * dim;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / dim, j = t % dim;
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab) {
      if (j == 0) atomicMin(&g_bad_position, static_cast<unsigned long long>(i));
      out[t] = 0.0f;
      continue;
    }
    out[t] = kF16 ? __half2float(static_cast<const __half*>(table)[id * dim + j])
                  : static_cast<const float*>(table)[id * dim + j];
  }
}

__global__ void scatter_add(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                            int64_t dim) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= dim) return;
  for (int64_t i = 0; i < n; ++i) dtable[ids[i] * dim + j] += dout[i * dim + j];
}

bool table_type(const EmbeddingArgs& a) { return a.dtype == DType::kF32 || a.dtype == DType::kF16; }

void embedding(const EmbeddingArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  const unsigned long long none = ULLONG_MAX;
  cudaMemcpyToSymbol(g_bad_position, &none, sizeof(none));
  if (a.dtype == DType::kF16)
    gather<true><<<blocks_for(a.n * a.dim), kThreads>>>(a.out, a.table, a.vocab, a.dim, a.ids, a.n);
  else
    gather<false>
        <<<blocks_for(a.n * a.dim), kThreads>>>(a.out, a.table, a.vocab, a.dim, a.ids, a.n);
  finish("embedding");
  unsigned long long bad = none;
  cudaMemcpyFromSymbol(&bad, g_bad_position, sizeof(bad));
  if (bad == none) return;
  int32_t id = 0;
  cudaMemcpy(&id, a.ids + bad, sizeof(id), cudaMemcpyDeviceToHost);
  throw Error("[embedding] token id " + std::to_string(id) + " at position " + std::to_string(bad) +
              " is out of range for vocab size " + std::to_string(a.vocab));
}

void embedding_backward(const EmbeddingBackwardArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  scatter_add<<<static_cast<unsigned>((a.dim + kThreads - 1) / kThreads), kThreads>>>(
      a.dtable, a.dout, a.ids, a.n, a.dim);
  finish("embedding_backward");
}

const KernelVariant<EmbeddingArgs> kEmbedding[] = {{"cuda", device_present, embedding, table_type}};
const KernelVariant<EmbeddingBackwardArgs> kEmbeddingBackward[] = {
    {"cuda", device_present, embedding_backward}};

}  // namespace

KernelVariants<EmbeddingArgs> embedding_kernels() { return kEmbedding; }
KernelVariants<EmbeddingBackwardArgs> embedding_backward_kernels() { return kEmbeddingBackward; }

}  // namespace nexus::cuda
