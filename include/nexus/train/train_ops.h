// Forward and backward kernels of the training pass (llm.c style: explicit, F32, row-major, one
// function per op and direction). Backward functions accumulate (+=) into their gradient outputs,
// but for those that say they write them (attention, SwiGLU, GELU: each the only term).
#pragma once

#include <cstdint>

#include "nexus/model.h"
#include "nexus/train/precision.h"

namespace nexus {
class ThreadPool;
}

namespace nexus::train {

// out[n, oc] = sum_c inp[n, c] * w[oc, c]   (torch's x W^T; w is a GGUF [out, in] matrix).
// With a pool, each thread computes one contiguous share of the output (rows, or columns for the
// output head and short batches: split_rows in train_ops.cc) through its own OpenBLAS call
// (OpenBLAS should then run on one thread); without, one call on OpenBLAS's own threads.
// bf16_operands: every operand holds bf16 values (the bf16 mode's rounded copies); then, where the
// CPU has AMX-BF16 (cpu::amx_bf16_active) and a share is large enough to repay converting its
// operands, the share runs on AMX tiles (cpu::gemm_bf16_amx): the same exact products, accumulated
// in f32 in another order.
// With `add_rows` ([n, oc], not `out`) and/or `bias` ([oc]) the output starts from their sum
// instead of zero: out = add_rows + bias + inp w^T, each share filled right before its GEMM adds
// into it (a residual connection and a bias with no pass of their own).
void matmul_forward(float* out, const float* inp, const float* w, int64_t n, int64_t c, int64_t oc,
                    ThreadPool* pool = nullptr, bool bf16_operands = false,
                    const float* add_rows = nullptr, const float* bias = nullptr);
// dinp += dout w and dw += dout^T inp: the two backward GEMMs (either output may be null), split
// over the pool like matmul_forward; a d input whose inner size oc is the vocabulary (oc >= 16 c)
// is summed in fixed chunks of oc instead, added in chunk order (the same for any thread count).
// With dbias not null it also does bias_backward(dbias, dout, n, oc): where our f32 GEMM computes
// dw, summed as it packs dout (no separate pass over dout), else after.
void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int64_t n, int64_t c, int64_t oc, ThreadPool* pool = nullptr,
                     bool bf16_operands = false, float* dbias = nullptr);

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

// Shapes of one causal self-attention call: b sequences of t tokens.
struct AttnShape {
  int64_t b, t, n_heads, n_kv_heads, head_dim;
  // 0: full causal; else key j is visible from query i iff i - window < j <= i (sliding window).
  int64_t window = 0;
};
// out [b*t, n_heads*hd] = softmax(q k^T / sqrt(hd), causal) v; query head h reads KV head
// h / (n_heads / n_kv_heads). Saves the probabilities in att [b, n_heads, t, t]. With a pool,
// (sequence, head) pairs are split over its threads; results are identical to pool == nullptr.
void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, ThreadPool* pool = nullptr);
// Floats of attention_backward scratch per thread for sequences of t tokens (t * t + t).
int64_t attention_backward_scratch(int64_t t);
// Writes dq, dk, dv (what they held is not read); `scratch` holds attention_backward_scratch(t)
// floats per thread of `pool` (for one thread when it is null).
// Work is split by (sequence, KV head), so no two threads write the same dk / dv row, and each
// element is accumulated in the same order as the serial loop (bit-identical results).
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* att,
                        const float* q, const float* k, const float* v, const AttnShape& s,
                        float* scratch, ThreadPool* pool = nullptr);

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

// Cross-entropy fused with its backward (llm.c style, one exp pass): for each of n rows of v
// logits, row_loss[i] = logsumexp(row) - row[targets[i]] (0 when targets[i] < 0), and the row is
// overwritten with d(scale * sum of row losses)/d row = (softmax - onehot) * scale (zeros for an
// ignored row). Returns the sum of row_loss, added in row order (the same for any thread count).
// With `round` other than kF32, each row is rounded to that precision (round_to) before its loss
// and its gradient after it, while the row is in cache: the same bits as round_to over all the
// logits, then this, then round_to over the gradients (the mixed-precision head's two passes).
double cross_entropy_fused(float* logits, float* row_loss, const int32_t* targets, int64_t n,
                           int64_t v, float scale, ThreadPool* pool = nullptr,
                           Precision round = Precision::kF32);

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

// The gradient of a bias added to each of n rows of c (matmul_forward's `bias`): adds the column
// sums of dout into db.
void bias_backward(float* db, const float* dout, int64_t n, int64_t c, ThreadPool* pool = nullptr);

// Learned positions: out[r, :] += table[r % t, :] for n rows of c (row r is at position r % t).
void positions_forward(float* out, const float* table, int64_t n, int64_t t, int64_t c);
void positions_backward(float* dtable, const float* dout, int64_t n, int64_t t, int64_t c);

// --- dispatch by architecture ---

// The block's normalisation: LayerNorm with bias (gpt2) or RMSNorm (llama; mean and b unused).
void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool = nullptr);
void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd,
                   int64_t n, ThreadPool* pool = nullptr);

}  // namespace nexus::train
