// Causal attention front-ends: shape checks, a profiler span, then the best kernel for the shape.
#include "ops/causal_attention.h"

#include <string>

#include "ops/op_span.h"

namespace nexus {
namespace {

void check(const char* op, const AttnShape& s) {
  NEXUS_CHECK(s.b >= 0 && s.t >= 1 && s.n_heads >= 1 && s.n_kv_heads >= 1 && s.head_dim >= 1 &&
                  s.n_heads % s.n_kv_heads == 0 && s.window >= 0,
              std::string("[") + op + "] bad shape: b " + std::to_string(s.b) + " t " +
                  std::to_string(s.t) + " heads " + std::to_string(s.n_heads) + "/" +
                  std::to_string(s.n_kv_heads) + " head_dim " + std::to_string(s.head_dim) +
                  " window " + std::to_string(s.window));
}

}  // namespace

void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, ThreadPool* pool, Device device) {
  NEXUS_OP_SPAN(
      "train.attention",
      4 * s.b * s.t * (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4 * s.b * s.n_heads * s.t * s.t,
      2 * s.b * s.n_heads * s.t * s.t * s.head_dim);
  check("causal_attention", s);
  run_op(CausalAttentionArgs{out, att, q, k, v, s}, pool, device);
}

int64_t attention_backward_scratch(int64_t t) { return cpu::attention_backward_scratch(t); }

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* att,
                        const float* q, const float* k, const float* v, const AttnShape& s,
                        float* scratch, ThreadPool* pool, Device device) {
  NEXUS_OP_SPAN(
      "train.attention_bwd",
      8 * s.b * s.t * (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4 * s.b * s.n_heads * s.t * s.t,
      4 * s.b * s.n_heads * s.t * s.t * s.head_dim);
  check("causal_attention_backward", s);
  run_op(CausalAttentionBackwardArgs{dq, dk, dv, dout, att, q, k, v, s, scratch}, pool, device);
}

}  // namespace nexus
