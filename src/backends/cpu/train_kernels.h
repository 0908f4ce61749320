// The per-item kernels behind the training ops' variant tables (attention_train.cc,
// cross_entropy.cc, dense.cc): a scalar reference and AVX2/FMA (some AVX-512) versions of each hot
// loop (attention per head, the causal softmax row, cross-entropy per row, the bias gradient,
// streaming clears). The parity tests call each directly.
#pragma once

#include <cstdint>

#include "backends/api/attention.h"

namespace nexus::cpu {

// Causal attention forward of query head h of sequence b (see attention_forward).
void attn_forward_head_scalar(float* out, float* att, const float* q, const float* k,
                              const float* v, const AttnShape& s, int64_t b, int64_t h);
// AVX2 version; requires head_dim % 8 == 0 and head_dim <= 64 (attn_avx2_supports).
void attn_forward_head_avx2(float* out, float* att, const float* q, const float* k, const float* v,
                            const AttnShape& s, int64_t b, int64_t h);
// Attention backward of every query head that reads KV head kh of sequence b; scratch holds
// attention_backward_scratch(t) floats (the scalar version uses t of them, the AVX2 one t * t).
void attn_backward_group_scalar(float* dq, float* dk, float* dv, const float* dout,
                                const float* att, const float* q, const float* k, const float* v,
                                const AttnShape& s, int64_t b, int64_t kh, float* dp);
void attn_backward_group_avx2(float* dq, float* dk, float* dv, const float* dout, const float* att,
                              const float* q, const float* k, const float* v, const AttnShape& s,
                              int64_t b, int64_t kh, float* dp);
// The same as OpenBLAS GEMMs in causal row blocks (train_attention_blas.cc; any head_dim; `dp`
// holds t * t floats). The caller runs OpenBLAS on one thread (several heads or groups run at
// once on the pool's threads).
void attn_forward_head_blas(float* out, float* att, const float* q, const float* k, const float* v,
                            const AttnShape& s, int64_t b, int64_t h);
void attn_backward_group_blas(float* dq, float* dk, float* dv, const float* dout,
                              const float* att, const float* q, const float* k, const float* v,
                              const AttnShape& s, int64_t b, int64_t kh, float* dp);
inline bool attn_avx2_supports(int64_t head_dim) { return head_dim % 8 == 0 && head_dim <= 64; }

// The same as register tiles (attention_tiles.h; any t): every product a fused multiply-add chain
// in a fixed order, so the AVX2 (head_dim % 8 == 0) and AVX-512 (head_dim % 16 == 0, when
// cpu::avx512_active()) versions give the same bits. Their backward writes dq, dk and dv (the
// other versions add to them). `yt` holds attn_tiled_scratch(t, head_dim)
// floats (a transposed copy of the keys or values), `dp` t * t floats.
inline int64_t attn_tiled_scratch(int64_t t, int64_t head_dim) {
  return (t + 31) / 32 * 32 * head_dim;
}
void attn_forward_head_tiled_avx2(float* out, float* att, const float* q, const float* k,
                                  const float* v, const AttnShape& s, int64_t b, int64_t h,
                                  float* yt);
void attn_forward_head_tiled_avx512(float* out, float* att, const float* q, const float* k,
                                    const float* v, const AttnShape& s, int64_t b, int64_t h,
                                    float* yt);
void attn_backward_group_tiled_avx2(float* dq, float* dk, float* dv, const float* dout,
                                    const float* att, const float* q, const float* k,
                                    const float* v, const AttnShape& s, int64_t b, int64_t kh,
                                    float* dp, float* yt);
void attn_backward_group_tiled_avx512(float* dq, float* dk, float* dv, const float* dout,
                                      const float* att, const float* q, const float* k,
                                      const float* v, const AttnShape& s, int64_t b, int64_t kh,
                                      float* dp, float* yt);

// Softmax in place of the first cnt scores of a row of t, zeros after them (the causal row of the
// saved probabilities); the scalar version sums in double, the AVX2 one in eight float lanes.
void softmax_causal_row_scalar(float* p, int64_t cnt, int64_t t);
void softmax_causal_row_avx2(float* p, int64_t cnt, int64_t t);
// Bit-identical to the AVX2 version, 16 lanes (train_kernels_avx512.cc; when cpu::avx512_active()).
void softmax_causal_row_avx512(float* p, int64_t cnt, int64_t t);
// Its backward scaled: d[j] = p[j] (d[j] - sum_k p[k] d[k]) scale for j < cnt (the sum in double),
// zeros in [cnt, end).
void softmax_causal_row_backward_scalar(float* d, const float* p, int64_t cnt, int64_t end,
                                        float scale);
void softmax_causal_row_backward_avx2(float* d, const float* p, int64_t cnt, int64_t end,
                                      float scale);

// Cross-entropy of one row of v logits against `target`: returns lse - row[target] and overwrites
// the row with (softmax - onehot) * scale. A row with target < 0 becomes zeros and returns 0.
float ce_row_scalar(float* row, int64_t v, int32_t target, float scale);
float ce_row_avx2(float* row, int64_t v, int32_t target, float scale);
float ce_row_avx512(float* row, int64_t v, int32_t target, float scale);  // = the AVX2 row's bits

// p[0, n) = 0 with non-temporal stores (no cache line read for ownership first): for buffers the
// caller will not read soon, like the gradients cleared at the start of a step.
void zero_stream_avx2(float* p, int64_t n);

// out[j] = a[j] + b[j] for j < n (the starting values of a GEMM with a residual and a bias).
void add_vectors_scalar(float* out, const float* a, const float* b, int64_t n);
void add_vectors_avx2(float* out, const float* a, const float* b, int64_t n);


// Bias gradient over the columns [j0, j1) of dout [n, c]: db[j] += dout[i][j] for i = 0 .. n-1 in
// order, so both versions (the AVX2 one eight columns per add) give the same bits.
void bias_backward_scalar(float* db, const float* dout, int64_t n, int64_t c, int64_t j0,
                          int64_t j1);
void bias_backward_avx2(float* db, const float* dout, int64_t n, int64_t c, int64_t j0, int64_t j1);

}  // namespace nexus::cpu
