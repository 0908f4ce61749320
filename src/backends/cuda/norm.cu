// RMSNorm and LayerNorm forward and backward on CUDA: a block of 256 threads per row, sums in f32
// through warp shuffles and one shared-memory step (a different order from the CPU's, so within
// 1e-5 of it, not bit for bit). The weight gradient is a second pass, a thread per column summing
// the rows in order, so that it does not depend on scheduling (no atomics).
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

__global__ void rms_norm_rows(const float* x, const float* w, float eps, float* y, float* rstd,
                              int64_t dim) {
  const float* xr = x + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  if (rstd != nullptr && threadIdx.x == 0) rstd[blockIdx.x] = r;
  float* yr = y + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) yr[i] = xr[i] * r * w[i];
}

// dx += r w dy - x r^3 / dim * sum(dy w x), per row.
__global__ void rms_norm_dx_rows(float* dx, const float* dy, const float* x, const float* w,
                                 const float* rstd, int64_t dim) {
  const int64_t o = blockIdx.x * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) s += dy[o + i] * w[i] * x[o + i];
  s = block_sum(s);
  const float r = rstd[blockIdx.x];
  const float c = r * r * r * s / static_cast<float>(dim);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads)
    dx[o + i] += r * w[i] * dy[o + i] - x[o + i] * c;
}

// dw[j] += sum over rows of dy x r, the rows in order.
__global__ void rms_norm_dw_cols(float* dw, const float* dy, const float* x, const float* rstd,
                                 int64_t rows, int64_t dim) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= dim) return;
  float s = 0.0f;
  for (int64_t r = 0; r < rows; ++r) s += dy[r * dim + j] * x[r * dim + j] * rstd[r];
  dw[j] += s;
}

// LayerNorm: y = (x - mean) r w + b with r = (var + eps)^-1/2, the variance from a second pass
// over the row (as the CPU, which sums in double: within 1e-5 of it).
__global__ void layer_norm_rows(const float* x, const float* w, const float* b, float eps, float* y,
                                float* mean, float* rstd, int64_t dim) {
  const float* xr = x + blockIdx.x * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) s += xr[i];
  const float m = block_sum(s) / static_cast<float>(dim);
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += (xr[i] - m) * (xr[i] - m);
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  if (threadIdx.x == 0) {
    if (mean != nullptr) mean[blockIdx.x] = m;
    if (rstd != nullptr) rstd[blockIdx.x] = r;
  }
  float* yr = y + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) yr[i] = (xr[i] - m) * r * w[i] + b[i];
}

// dx += r (g - mean(g) - xhat mean(g xhat)) with g = dy w, per row.
__global__ void layer_norm_dx_rows(float* dx, const float* dy, const float* x, const float* w,
                                   const float* mean, const float* rstd, int64_t dim) {
  const int64_t o = blockIdx.x * dim;
  const float m = mean[blockIdx.x], r = rstd[blockIdx.x];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float g = dy[o + i] * w[i];
    sg += g;
    sgx += g * (x[o + i] - m) * r;
  }
  const float mg = block_sum(sg) / static_cast<float>(dim);
  const float mgx = block_sum(sgx) / static_cast<float>(dim);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float xhat = (x[o + i] - m) * r;
    dx[o + i] += r * (dy[o + i] * w[i] - mg - xhat * mgx);
  }
}

// dw[j] += sum over rows of dy xhat, db[j] += sum of dy, the rows in order.
__global__ void layer_norm_dwb_cols(float* dw, float* db, const float* dy, const float* x,
                                    const float* mean, const float* rstd, int64_t rows,
                                    int64_t dim) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= dim) return;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float g = dy[r * dim + j];
    sw += g * (x[r * dim + j] - mean[r]) * rstd[r];
    sb += g;
  }
  dw[j] += sw;
  db[j] += sb;
}

void rms_norm_cuda(const RmsNormArgs& a, ThreadPool*) {
  if (a.rows == 0) return;
  rms_norm_rows<<<static_cast<unsigned>(a.rows), kThreads>>>(a.x, a.w, a.eps, a.y, a.rstd, a.dim);
  finish("rms_norm");
}

void rms_norm_backward_cuda(const RmsNormBackwardArgs& a, ThreadPool*) {
  if (a.rows == 0) return;
  rms_norm_dx_rows<<<static_cast<unsigned>(a.rows), kThreads>>>(a.dx, a.dy, a.x, a.w, a.rstd,
                                                                a.dim);
  const auto col_blocks = static_cast<unsigned>((a.dim + kThreads - 1) / kThreads);
  rms_norm_dw_cols<<<col_blocks, kThreads>>>(a.dw, a.dy, a.x, a.rstd, a.rows, a.dim);
  finish("rms_norm_backward");
}

void layer_norm_cuda(const LayerNormArgs& a, ThreadPool*) {
  if (a.rows == 0) return;
  layer_norm_rows<<<static_cast<unsigned>(a.rows), kThreads>>>(a.x, a.w, a.b, a.eps, a.y, a.mean,
                                                               a.rstd, a.dim);
  finish("layer_norm");
}

void layer_norm_backward_cuda(const LayerNormBackwardArgs& a, ThreadPool*) {
  if (a.rows == 0) return;
  layer_norm_dx_rows<<<static_cast<unsigned>(a.rows), kThreads>>>(a.dx, a.dy, a.x, a.w, a.mean,
                                                                  a.rstd, a.dim);
  const auto col_blocks = static_cast<unsigned>((a.dim + kThreads - 1) / kThreads);
  layer_norm_dwb_cols<<<col_blocks, kThreads>>>(a.dw, a.db, a.dy, a.x, a.mean, a.rstd, a.rows,
                                                a.dim);
  finish("layer_norm_backward");
}

const KernelVariant<RmsNormArgs> kRmsNorm[] = {{"cuda", device_present, rms_norm_cuda}};
const KernelVariant<LayerNormArgs> kLayerNorm[] = {{"cuda", device_present, layer_norm_cuda}};
const KernelVariant<LayerNormBackwardArgs> kLayerNormBackward[] = {
    {"cuda", device_present, layer_norm_backward_cuda}};
const KernelVariant<RmsNormBackwardArgs> kRmsNormBackward[] = {
    {"cuda", device_present, rms_norm_backward_cuda}};

}  // namespace

KernelVariants<RmsNormArgs> rms_norm_kernels() { return kRmsNorm; }
KernelVariants<RmsNormBackwardArgs> rms_norm_backward_kernels() { return kRmsNormBackward; }
KernelVariants<LayerNormArgs> layer_norm_kernels() { return kLayerNorm; }
KernelVariants<LayerNormBackwardArgs> layer_norm_backward_kernels() { return kLayerNormBackward; }

}  // namespace nexus::cuda
