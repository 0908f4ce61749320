// The training pass's ops in llm.c's shape (explicit, F32, row-major, one function per op and
// direction, each recording a profiler span): the dense layer (ops/dense.h), causal attention
// (ops/causal_attention.h) and the cross-entropy (ops/loss.h), and here positional front-ends of
// the shared registry ops (norms, RoPE, activations, embedding) that inference runs too, and the
// learned positions. Backward functions accumulate (+=) into their gradient outputs, but for
// those that say they write them (attention, SwiGLU, GELU: each the only term).
#pragma once

#include <cstdint>

#include "nexus/config.h"
#include "ops/causal_attention.h"
#include "ops/dense.h"
#include "ops/loss.h"

namespace nexus {

// The ops below take an optional pool: rows (or elements) are split over its threads, and every
// result is the same for any thread count (reductions over rows use a fixed blocking).

// out = x / sqrt(mean(x^2) + eps) * w per row of c; saves 1/rms of each row in rstd[n].
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t n, int64_t c,
                     float eps, ThreadPool* pool = nullptr);
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t c, ThreadPool* pool = nullptr);

// Rotates each head of x [n, n_heads, head_dim] in place; row r is at position r % t. With
// inverse = true it applies the transpose rotation, which is the backward of the forward.
void rope_rotate(float* x, int64_t n, int64_t t, int64_t n_heads, int64_t head_dim,
                 int64_t rope_dim, RopeStyle style, const float* cs, bool inverse,
                 ThreadPool* pool = nullptr);

// out = silu(g) * u elementwise over n values; the backward writes dg and du (it does not add to
// them: each is the only term of its gradient).
void swiglu_forward(float* out, const float* g, const float* u, int64_t n,
                    ThreadPool* pool = nullptr);
void swiglu_backward(float* dg, float* du, const float* dout, const float* g, const float* u,
                     int64_t n, ThreadPool* pool = nullptr);

// out[i] = table[tokens[i]] (rows of c; every token in [0, vocab), else nexus::Error). Both go
// through the embedding op (ops/embedding.h), inference's too.
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t vocab,
                       int64_t n, int64_t c);
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t c);

// --- gpt2 (train_ops_gpt2.cc) ---

// out = (x - mean) / sqrt(var + eps) * w + b per row of c (biased variance, as torch's
// LayerNorm); saves each row's mean and 1/sqrt(var + eps) in mean[n] and rstd[n].
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t n, int64_t c, float eps, ThreadPool* pool = nullptr);
void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t n,
                        int64_t c, ThreadPool* pool = nullptr);

// out = gelu(x) with GPT-2's tanh approximation, elementwise over n values; the backward writes
// dx = dout gelu'(x).
void gelu_forward(float* out, const float* x, int64_t n, ThreadPool* pool = nullptr);
void gelu_backward(float* dx, const float* dout, const float* x, int64_t n,
                   ThreadPool* pool = nullptr);

// Learned positions: out[r, :] += table[r % t, :] for n rows of c (row r is at position r % t).
void positions_forward(float* out, const float* table, int64_t n, int64_t t, int64_t c);
void positions_backward(float* dtable, const float* dout, int64_t n, int64_t t, int64_t c);

}  // namespace nexus
