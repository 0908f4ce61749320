// Arguments of causal self-attention with saved probabilities (ops/causal_attention.h): the
// training pass's attention, whose backward reads the probabilities the forward kept.
#pragma once

#include <cstdint>

namespace nexus {

// Shapes of one causal self-attention call: b sequences of t tokens; q is [b*t, n_heads*head_dim],
// k and v [b*t, n_kv_heads*head_dim]; query head h reads KV head h / (n_heads / n_kv_heads).
struct AttnShape {
  int64_t b, t, n_heads, n_kv_heads, head_dim;
  // 0: full causal; else key j is visible from query i iff i - window < j <= i (sliding window).
  int64_t window = 0;
};

// out = softmax(q k^T / sqrt(head_dim), causal) v; the probabilities go to att [b, n_heads, t, t].
struct CausalAttentionArgs {
  float* out;
  float* att;
  const float* q;
  const float* k;
  const float* v;
  AttnShape s;
};

// Writes dq, dk and dv (what they held is not read). `scratch` holds attention_backward_scratch(t)
// floats (ops/causal_attention.h) per thread of the pool (for one thread without a pool).
struct CausalAttentionBackwardArgs {
  float* dq;
  float* dk;
  float* dv;
  const float* dout;
  const float* att;
  const float* q;
  const float* k;
  const float* v;
  AttnShape s;
  float* scratch;
};

}  // namespace nexus
