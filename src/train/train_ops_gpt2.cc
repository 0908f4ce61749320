// Training kernels gpt2 adds to the llama set (see train_ops.h): LayerNorm with bias, tanh GELU,
// bias add and learned positions. Rows (or columns) are split over the pool; GELU and the bias
// gradient have AVX2 kernels, the LayerNorm rows bit-identical ones; the norm's row reductions
// are in double. Also the norm dispatch by architecture (LayerNorm for gpt2, RMSNorm for llama).
#include <algorithm>
#include <cmath>
#include <vector>

#include "train/train_kernels.h"
#include "train/train_ops.h"
#include "train/train_parallel.h"

namespace nexus::train {

using par::for_aligned;
using par::for_ranges;
using par::use_avx2;

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t n, int64_t c, float eps, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.layernorm", 8 * n * c, 0);
  const auto row =
      use_avx2() ? kern::layernorm_forward_row_avx2 : kern::layernorm_forward_row_scalar;
  for_ranges(pool, n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) row(out + i * c, mean + i, rstd + i, x + i * c, w, b, c, eps);
  });
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t n, int64_t c,
                        ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.layernorm_bwd", 16 * n * c, 0);
  // y_j = xhat_j w_j + b_j with xhat = (x - mean) r; with g_j = dy_j w_j,
  // dx_j = r (g_j - mean(g) - xhat_j mean(g xhat)).
  // dw and db are summed per fixed block of rows, then over blocks in order: the same for any
  // thread count.
  constexpr int64_t kRows = 64;
  const int64_t blocks = (n + kRows - 1) / kRows;
  std::vector<float> part(static_cast<size_t>(blocks * c * 2), 0.0f);
  const auto row =
      use_avx2() ? kern::layernorm_backward_row_avx2 : kern::layernorm_backward_row_scalar;
  for_ranges(pool, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* pw = part.data() + blk * c * 2;
      float* pb = pw + c;
      for (int64_t i = blk * kRows; i < std::min(n, (blk + 1) * kRows); ++i)
        row(dx + i * c, pw, pb, dout + i * c, x + i * c, w, mean[i], rstd[i], c);
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t j = 0; j < c; ++j) {
      dw[j] += part[blk * c * 2 + j];
      db[j] += part[blk * c * 2 + c + j];
    }
}

void gelu_forward(float* out, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.gelu", 8 * n, 0);
  const auto fn = use_avx2() ? kern::gelu_forward_avx2 : kern::gelu_forward_scalar;
  for_aligned(pool, n, 4096, [&](int64_t i0, int64_t i1) { fn(out + i0, x + i0, i1 - i0); });
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.gelu_bwd", 16 * n, 0);
  const auto fn = use_avx2() ? kern::gelu_backward_avx2 : kern::gelu_backward_scalar;
  for_aligned(pool, n, 4096,
              [&](int64_t i0, int64_t i1) { fn(dx + i0, dout + i0, x + i0, i1 - i0); });
}

void bias_backward(float* db, const float* dout, int64_t n, int64_t c, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.bias_bwd", 4 * n * c, n * c);
  // Split over columns: each column still sums its rows in order.
  const auto fn = use_avx2() ? kern::bias_backward_avx2 : kern::bias_backward_scalar;
  for_ranges(pool, c, 64, [&](int64_t j0, int64_t j1) { fn(db, dout, n, c, j0, j1); });
}

namespace kern {

void bias_backward_scalar(float* db, const float* dout, int64_t n, int64_t c, int64_t j0,
                          int64_t j1) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = j0; j < j1; ++j) db[j] += dout[i * c + j];
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

}  // namespace kern

void positions_forward(float* out, const float* table, int64_t n, int64_t t, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    const float* p = table + (r % t) * c;
    for (int64_t j = 0; j < c; ++j) out[r * c + j] += p[j];
  }
}

void positions_backward(float* dtable, const float* dout, int64_t n, int64_t t, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    float* p = dtable + (r % t) * c;
    for (int64_t j = 0; j < c; ++j) p[j] += dout[r * c + j];
  }
}

void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_forward(out, mean, rstd, x, w, b, n, c.dim, c.norm_eps, pool);
  else
    rmsnorm_forward(out, rstd, x, w, n, c.dim, c.norm_eps, pool);
}

void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd, int64_t n,
                   ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, n, c.dim, pool);
  else
    rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c.dim, pool);
}

}  // namespace nexus::train
