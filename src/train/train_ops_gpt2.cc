// Training ops gpt2 adds to the llama set (see train_ops.h): LayerNorm with bias and tanh GELU
// (the shared ops of ops/norm.h and ops/activation.h, profiled as training spans), the bias
// gradient and learned positions; and the norm dispatch by architecture (LayerNorm for gpt2,
// RMSNorm for llama).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/activation.h"
#include "ops/norm.h"
#include "train/train_kernels.h"
#include "nexus/train/train_ops.h"
#include "train/train_parallel.h"

namespace nexus::train {

using par::for_ranges;
using par::use_avx2;

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t n, int64_t c, float eps, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.layernorm", 8 * n * c, 0);
  nexus::layer_norm(LayerNormArgs{x, w, b, eps, out, mean, rstd, n, c}, pool);
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t n, int64_t c,
                        ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.layernorm_bwd", 16 * n * c, 0);
  nexus::layer_norm_backward(LayerNormBackwardArgs{dx, dw, db, dout, x, w, mean, rstd, n, c}, pool);
}

void gelu_forward(float* out, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.gelu", 8 * n, 0);
  nexus::gelu(GeluArgs{out, x, n}, pool);
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.gelu_bwd", 16 * n, 0);
  nexus::gelu_backward(GeluBackwardArgs{dx, dout, x, n}, pool);
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
