// CPU normalisation kernels (backends/api/norm.h): RMSNorm and LayerNorm, forward and backward.
// The scalar rows are the references; the AVX2 rows (norm_avx2.cc) give the same bits. Row sums
// are in double, four partial sums in a fixed order (par::sum4), and rows split over the pool; the
// weight gradients are summed per fixed block of rows, then over the blocks in order, so no result
// depends on the thread count.
#include "backends/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {

using par::for_ranges;
using par::sum4;

void rmsnorm_forward_row_scalar(float* out, float* rstd, const float* x, const float* w, int64_t c,
                                float eps) {
  const double ss = sum4(c, [&](int64_t j) { return static_cast<double>(x[j]) * x[j]; });
  const float r = static_cast<float>(1.0 / std::sqrt(ss / c + eps));
  *rstd = r;
  for (int64_t j = 0; j < c; ++j) out[j] = x[j] * r * w[j];
}

void rmsnorm_backward_row_scalar(float* dx, float* pw, const float* g, const float* x,
                                 const float* w, float r, int64_t c) {
  const double dot = sum4(c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j] * x[j]; });
  const float k = static_cast<float>(dot * r * r * r / c);
  for (int64_t j = 0; j < c; ++j) {
    dx[j] += r * w[j] * g[j] - k * x[j];
    pw[j] += g[j] * x[j] * r;
  }
}

void layernorm_forward_row_scalar(float* out, float* mean, float* rstd, const float* x,
                                  const float* w, const float* b, int64_t c, float eps) {
  const double m = sum4(c, [&](int64_t j) { return static_cast<double>(x[j]); }) / c;
  const double var = sum4(c, [&](int64_t j) { return (x[j] - m) * (x[j] - m); });
  const double r = 1.0 / std::sqrt(var / c + eps);
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(r);
  for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>((x[j] - m) * r) * w[j] + b[j];
}

void layernorm_backward_row_scalar(float* dx, float* pw, float* pb, const float* g, const float* x,
                                   const float* w, float m, float r, int64_t c) {
  const double sg = sum4(c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j]; });
  const double sgx =
      sum4(c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j] * ((x[j] - m) * r); });
  const float mg = static_cast<float>(sg / c), mgx = static_cast<float>(sgx / c);
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = (x[j] - m) * r;
    dx[j] += r * (g[j] * w[j] - mg - xhat * mgx);
    pw[j] += g[j] * xhat;
    pb[j] += g[j];
  }
}

namespace {

// Rows of the gradient sums' blocks.
constexpr int64_t kGradRows = 64;

using RmsRow = void (*)(float*, float*, const float*, const float*, int64_t, float);
using RmsBackRow = void (*)(float*, float*, const float*, const float*, const float*, float,
                            int64_t);
using LnRow = void (*)(float*, float*, float*, const float*, const float*, const float*, int64_t,
                       float);
using LnBackRow = void (*)(float*, float*, float*, const float*, const float*, const float*, float,
                           float, int64_t);

template <RmsRow row>
void rms_forward(const RmsNormArgs& a, ThreadPool* pool) {
  for_ranges(pool, a.rows, 16, [&](int64_t r0, int64_t r1) {
    float r;
    for (int64_t i = r0; i < r1; ++i)
      row(a.y + i * a.dim, a.rstd ? a.rstd + i : &r, a.x + i * a.dim, a.w, a.dim, a.eps);
  });
}

// y_j = x_j r w_j with r = (mean(x^2) + eps)^-1/2, so
// dx_j = r w_j dy_j - r^3 x_j / c * sum_k dy_k w_k x_k.
template <RmsBackRow row>
void rms_backward(const RmsNormBackwardArgs& a, ThreadPool* pool) {
  const int64_t n = a.rows, c = a.dim, blocks = (n + kGradRows - 1) / kGradRows;
  std::vector<float> part(static_cast<size_t>(blocks * c), 0.0f);
  for_ranges(pool, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* pw = part.data() + blk * c;
      for (int64_t i = blk * kGradRows; i < std::min(n, (blk + 1) * kGradRows); ++i)
        row(a.dx + i * c, pw, a.dy + i * c, a.x + i * c, a.w, a.rstd[i], c);
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t j = 0; j < c; ++j) a.dw[j] += part[blk * c + j];
}

template <LnRow row>
void ln_forward(const LayerNormArgs& a, ThreadPool* pool) {
  for_ranges(pool, a.rows, 16, [&](int64_t r0, int64_t r1) {
    float m, r;
    for (int64_t i = r0; i < r1; ++i)
      row(a.y + i * a.dim, a.mean ? a.mean + i : &m, a.rstd ? a.rstd + i : &r, a.x + i * a.dim, a.w,
          a.b, a.dim, a.eps);
  });
}

// y_j = xhat_j w_j + b_j with xhat = (x - mean) r; with g_j = dy_j w_j,
// dx_j = r (g_j - mean(g) - xhat_j mean(g xhat)).
template <LnBackRow row>
void ln_backward(const LayerNormBackwardArgs& a, ThreadPool* pool) {
  const int64_t n = a.rows, c = a.dim, blocks = (n + kGradRows - 1) / kGradRows;
  std::vector<float> part(static_cast<size_t>(blocks * c * 2), 0.0f);
  for_ranges(pool, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* pw = part.data() + blk * c * 2;
      float* pb = pw + c;
      for (int64_t i = blk * kGradRows; i < std::min(n, (blk + 1) * kGradRows); ++i)
        row(a.dx + i * c, pw, pb, a.dy + i * c, a.x + i * c, a.w, a.mean[i], a.rstd[i], c);
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t j = 0; j < c; ++j) {
      a.dw[j] += part[blk * c * 2 + j];
      a.db[j] += part[blk * c * 2 + c + j];
    }
}

const KernelVariant<RmsNormArgs> kRms[] = {
    {"avx2", avx2_active, rms_forward<rmsnorm_forward_row_avx2>},
    {"scalar", always_available, rms_forward<rmsnorm_forward_row_scalar>}};
const KernelVariant<RmsNormBackwardArgs> kRmsBack[] = {
    {"avx2", avx2_active, rms_backward<rmsnorm_backward_row_avx2>},
    {"scalar", always_available, rms_backward<rmsnorm_backward_row_scalar>}};
const KernelVariant<LayerNormArgs> kLn[] = {
    {"avx2", avx2_active, ln_forward<layernorm_forward_row_avx2>},
    {"scalar", always_available, ln_forward<layernorm_forward_row_scalar>}};
const KernelVariant<LayerNormBackwardArgs> kLnBack[] = {
    {"avx2", avx2_active, ln_backward<layernorm_backward_row_avx2>},
    {"scalar", always_available, ln_backward<layernorm_backward_row_scalar>}};

}  // namespace

KernelVariants<RmsNormArgs> rms_norm_kernels() { return kRms; }
KernelVariants<RmsNormBackwardArgs> rms_norm_backward_kernels() { return kRmsBack; }
KernelVariants<LayerNormArgs> layer_norm_kernels() { return kLn; }
KernelVariants<LayerNormBackwardArgs> layer_norm_backward_kernels() { return kLnBack; }

}  // namespace nexus::cpu
