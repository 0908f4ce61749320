// Positional front-ends of the registry ops the training pass runs (ops/train_ops.h), each with
// its profiler span.
#include "ops/train_ops.h"

#include "ops/activation.h"
#include "ops/embedding.h"
#include "ops/norm.h"
#include "ops/op_span.h"
#include "ops/rope.h"

namespace nexus {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t n, int64_t c,
                     float eps, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.rmsnorm", 8 * n * c, 4 * n * c);
  rms_norm(RmsNormArgs{x, w, eps, out, rstd, n, c}, pool);
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.rmsnorm_bwd", 16 * n * c, 10 * n * c);
  rms_norm_backward(RmsNormBackwardArgs{dx, dw, dout, x, w, rstd, n, c}, pool);
}

void rope_rotate(float* x, int64_t n, int64_t t, int64_t n_heads, int64_t head_dim,
                 int64_t rope_dim, RopeStyle style, const float* cs, bool inverse,
                 ThreadPool* pool) {
  NEXUS_OP_SPAN("train.rope", 8 * n * n_heads * rope_dim, 3 * n * n_heads * rope_dim);
  rope(RopeArgs{x, n, n_heads, head_dim, rope_dim, style, cs, t, inverse}, pool);
}

void swiglu_forward(float* out, const float* g, const float* u, int64_t n, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.swiglu", 12 * n, 0);
  swiglu(SwigluArgs{out, g, u, n}, pool);
}

void swiglu_backward(float* dg, float* du, const float* dout, const float* g, const float* u,
                     int64_t n, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.swiglu_bwd", 28 * n, 0);
  swiglu_backward(SwigluBackwardArgs{dg, du, dout, g, u, n}, pool);
}

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t vocab,
                       int64_t n, int64_t c) {
  embedding(EmbeddingArgs{table, DType::kF32, vocab, c, tokens, n, out});
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t c) {
  NEXUS_OP_SPAN("train.embedding_bwd", 8 * n * c, 0);
  embedding_backward(EmbeddingBackwardArgs{dtable, dout, tokens, n, c});
}

}  // namespace nexus
