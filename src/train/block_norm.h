// The transformer block's normalisation for the training pass, by architecture.
#pragma once

#include "nexus/model.h"
#include "ops/train_ops.h"

namespace nexus::train {

// The block's normalisation: LayerNorm with bias (gpt2) or RMSNorm (llama, qwen; mean and b
// unused).
inline void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_forward(out, mean, rstd, x, w, b, n, c.dim, c.norm_eps, pool);
  else
    rmsnorm_forward(out, rstd, x, w, n, c.dim, c.norm_eps, pool);
}

inline void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd, int64_t n,
                   ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, n, c.dim, pool);
  else
    rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c.dim, pool);
}

}  // namespace nexus::train
