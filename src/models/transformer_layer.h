// The transformer block as a layer type (models/layer.h): pre-norm attention and MLP with
// residuals, in the variants llama, qwen2/qwen3 and gpt2 spell in their LayerSlot tables (RMSNorm
// or LayerNorm with bias, separate or fused QKV with optional biases, per-head q/k norms, RoPE of
// either style or none, full or sliding-window causal attention, SwiGLU or GELU MLP).
#pragma once

#include <cstdint>

#include "models/layer.h"
#include "nexus/core/thread_pool.h"
#include "nexus/model.h"

namespace nexus {

const LayerType& transformer_layer();

// Inference of the SwiGLU feed-forward half (llama, qwen, and every granitehybrid layer):
// x += down(silu(gate(h)) * up(h)), h = rmsnorm(x) with ffn_norm.
// With `tp`, w is this rank's slice and the down projection's partial products are summed over
// the ranks.
void swiglu_ffn_infer(const ModelConfig& c, const LayerWeights& w, ForwardState& st,
                      TensorParallel* tp = nullptr);

// The architecture's normalisation over rows of c.dim: LayerNorm with bias (gpt2) or RMSNorm
// (llama, qwen; mean and b unused). The blocks and the final norm use it.
void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool = nullptr);
void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd, int64_t n,
                   ThreadPool* pool = nullptr);

}  // namespace nexus
