// Arguments of the activation ops, shared by the front-ends (ops/activation.h) and every backend.
// Element-wise over n f32 values; outputs may alias the input of the same index. The backward ops
// write their gradients (each is the only term of its gradient).
#pragma once

#include <cstdint>

namespace nexus {

// out = silu(g) * u, silu(x) = x / (1 + exp(-x)) (llama's gated FFN).
struct SwigluArgs {
  float* out;
  const float* g;
  const float* u;
  int64_t n;
};

struct SwigluBackwardArgs {
  float* dg;
  float* du;
  const float* dout;
  const float* g;
  const float* u;
  int64_t n;
};

// out = gelu(x) with GPT-2's tanh approximation.
struct GeluArgs {
  float* out;
  const float* x;
  int64_t n;
};

struct GeluBackwardArgs {
  float* dx;
  const float* dout;
  const float* x;
  int64_t n;
};

}  // namespace nexus
