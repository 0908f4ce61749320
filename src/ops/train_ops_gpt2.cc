// Training ops gpt2 adds to the llama set (see train_ops.h): LayerNorm with bias and tanh GELU
// (the shared ops of ops/norm.h and ops/activation.h, profiled as training spans), learned
// positions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/activation.h"
#include "ops/norm.h"
#include "ops/op_span.h"
#include "ops/train_ops.h"

namespace nexus {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t n, int64_t c, float eps, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.layernorm", 8 * n * c, 0);
  layer_norm(LayerNormArgs{x, w, b, eps, out, mean, rstd, n, c}, pool);
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t n, int64_t c,
                        ThreadPool* pool) {
  NEXUS_OP_SPAN("train.layernorm_bwd", 16 * n * c, 0);
  layer_norm_backward(LayerNormBackwardArgs{dx, dw, db, dout, x, w, mean, rstd, n, c}, pool);
}

void gelu_forward(float* out, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.gelu", 8 * n, 0);
  gelu(GeluArgs{out, x, n}, pool);
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.gelu_bwd", 16 * n, 0);
  gelu_backward(GeluBackwardArgs{dx, dout, x, n}, pool);
}

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

}  // namespace nexus
