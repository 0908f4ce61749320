// Arguments of the compressive memory op (ops/memory.h): Infini-attention's long-term memory, a
// linear associative memory per sequence and key/value head written with the delta rule after
// each segment of tokens and read by the next segments' queries.
#pragma once

#include <cstdint>

namespace nexus {

// Per sequence and key/value head g (read by the query heads h with g = h / (heads / kv_heads)),
// from the memory M_g [head_dim x head_dim] and normaliser z_g [head_dim] in `state` (zeros when
// null), over the t tokens of the sequence in segments of `segment` tokens (the last may be
// shorter): each segment's queries read the memory of the segments before it,
//   y[i][h] = phi(q[i][h])^T M_g / (phi(q[i][h]) . z_g + eps),
// and then the segment is written with the delta rule (every key read against the memory before
// the segment),
//   M_g += sum_i phi(k[i][g]) (v[i][g] - phi(k[i][g])^T M_g / (phi(k[i][g]) . z_g + eps))^T,
//   z_g += sum_i phi(k[i][g]),
// with phi(x) = elu(x) + 1 (positive) and eps = kMemoryEps. Inference reads the segment it is
// filling without writing it (`write` false) and writes it once complete (q null: no reads).
struct MemoryArgs {
  const float* q;  // [b * t][heads * head_dim]; null: no reads (y untouched)
  const float* k;  // [b * t][kv_heads * head_dim]
  const float* v;  // [b * t][kv_heads * head_dim]
  float* y;        // [b * t][heads * head_dim]
  // [b][segments][kv_heads][memory_floats]: the memory before each segment (for the backward);
  // null: not kept.
  float* saved;
  // [b][kv_heads][memory_floats]: the memory to start from, replaced by the one after the last
  // segment (inference); null: zeros, nothing kept.
  float* state;
  int64_t b, t, segment, heads, kv_heads, head_dim;
  bool write = true;  // false: the segments are read only (the memory stays as it was)
  // Slot reduction (forward only): with `proj` [kv_heads][head_dim][slots] every feature phi(x)
  // is replaced by proj_g^T phi(x) before it reads or writes, so M_g is [slots x head_dim] and
  // z_g [slots]. Null: the full head_dim slots.
  const float* proj = nullptr;
  int64_t slots = 0;
};

// The backward from a zero starting memory, through every segment: dq, dk and dv written.
struct MemoryBackwardArgs {
  MemoryArgs fwd;  // the forward's inputs, `saved` filled by it (state unused)
  const float* dy;
  float* dq;
  float* dk;
  float* dv;
};

constexpr float kMemoryEps = 1e-6f;

// The memory's rows (its slots): `slots`, or head_dim when 0.
inline int64_t memory_rows(int64_t head_dim, int64_t slots) { return slots > 0 ? slots : head_dim; }
// Floats of one head's memory: M then z.
inline int64_t memory_floats(int64_t head_dim, int64_t slots = 0) {
  return (head_dim + 1) * memory_rows(head_dim, slots);
}
inline int64_t memory_segments(int64_t t, int64_t segment) { return (t + segment - 1) / segment; }

}  // namespace nexus

namespace nexus {

// Titans' long-term memory (Behrouz et al. 2024) with a linear memory (L_M = 1), written once a
// segment by a gradient step with momentum and forgetting. Per sequence and key/value head g
// (read by query heads h with g = h / (heads / kv_heads)), with unit-normalised queries and keys
// x^ = x / sqrt(|x|^2 + kTitansEps), from M_g = S_g = 0 [head_dim x head_dim] (or `state`):
//   y[i][h] = q^[i][h] M_g                                (the memory before the segment)
//   G = (2/n) sum_i k^_i^T (k^_i M_g - v_i)               (d/dM of (1/n) sum_i |k^_i M_g - v_i|^2)
//   S_g = eta_g S_g - theta_g G,   M_g = (1 - alpha_g) M_g + S_g
// over the segment's n keys, eta (momentum), theta (step) and alpha (forgetting) in (0, 1) per
// key/value head. The loss is the mean over the keys, so a step's size does not grow with the
// segment: with unit keys the loss curves by at most 2, and a plain step of theta < 1 cannot
// overshoot.
struct TitansArgs {
  const float* q;  // [b * t][heads * head_dim]; null: no reads
  const float* k;  // [b * t][kv_heads * head_dim]
  const float* v;
  float* y;            // [b * t][heads * head_dim]
  const float* eta;    // [kv_heads]
  const float* theta;  // [kv_heads]
  const float* alpha;  // [kv_heads]
  float* saved;  // [b][segments][kv_heads][titans_floats]: M and S before each segment; or null
  float* state;  // [b][kv_heads][titans_floats] in and out; null: zeros, not kept
  int64_t b, t, segment, heads, kv_heads, head_dim;
  bool write = true;
  // Slot reduction (forward only) as for MemoryArgs: unit queries and keys become proj_g^T x^,
  // M_g and S_g [slots x head_dim].
  const float* proj = nullptr;
  int64_t slots = 0;
};

// The backward from zero memory through every segment: dq, dk, dv written; deta, dtheta and
// dalpha [kv_heads] added to (summed over the sequences in a fixed order).
struct TitansBackwardArgs {
  TitansArgs fwd;
  const float* dy;
  float* dq;
  float* dk;
  float* dv;
  float* deta;
  float* dtheta;
  float* dalpha;
};

constexpr float kTitansEps = 1e-6f;
constexpr float kTitansGradClamp = 8.0f;
// Floats of one head's Titans memory: M then S.
inline int64_t titans_floats(int64_t head_dim, int64_t slots = 0) {
  return 2 * head_dim * memory_rows(head_dim, slots);
}

// Titans' deep memory (L_M = 2): per sequence and key/value head g an MLP
//   M_g(x) = silu(x W1_g) W2_g,   W1_g [head_dim x hidden], W2_g [hidden x head_dim],
// starting from the learned initial weights `w1`, `w2` (model parameters, meta-learned by the
// outer training) and written once a segment by a gradient step with momentum and forgetting on
// the associative loss L = (1/n) sum_i |M_g(k^_i) - v_i|^2 over the segment's n unit keys:
//   y[i][h] = M_g(q^[i][h])                               (the memory before the segment)
//   G = clamp(dL/dW1, dL/dW2),   S_j = eta_g S_j - theta_g G_j,
//   W_j = W_j0 + (1 - alpha_g) (W_j - W_j0) + S_j
// for j = 1, 2, where clamp scales both gradients by tau tanh(n / tau) / n, n their joint norm
// and tau = kTitansGradClamp: about the identity for small gradients, a step of at most
// theta tau for large ones. Unlike the linear memory's, a deep memory's loss curves without bound
// as its weights grow, and an unbounded step then diverges within a few segments. Forgetting decays
// toward the learned initial memory rather than toward zero: zero weights are a fixed point of a
// two-layer memory (both layers' gradients vanish there), so a memory that forgot everything could
// never learn again. The state holds D_j = W_j - W_j0 and S_j, so zeros are the initial memory, as
// for the other memories.
struct TitansMlpArgs {
  const float* q;  // [b * t][heads * head_dim]; null: no reads
  const float* k;  // [b * t][kv_heads * head_dim]
  const float* v;
  float* y;            // [b * t][heads * head_dim]
  const float* eta;    // [kv_heads]
  const float* theta;  // [kv_heads]
  const float* alpha;  // [kv_heads]
  const float* w1;     // [kv_heads][head_dim][hidden]
  const float* w2;     // [kv_heads][hidden][head_dim]
  // [b][segments][kv_heads][titans_mlp_floats]: D1, D2, S1, S2 before each segment; or null.
  float* saved;
  float* state;  // [b][kv_heads][titans_mlp_floats] in and out; null: zeros, not kept
  int64_t b, t, segment, heads, kv_heads, head_dim, hidden;
  bool write = true;
};

// The backward from the initial memory through every segment: dq, dk, dv written; deta, dtheta,
// dalpha [kv_heads] and dw1, dw2 (shaped as w1, w2) added to, summed over the sequences in order.
struct TitansMlpBackwardArgs {
  TitansMlpArgs fwd;
  const float* dy;
  float* dq;
  float* dk;
  float* dv;
  float* deta;
  float* dtheta;
  float* dalpha;
  float* dw1;
  float* dw2;
};

// Floats of one head's deep memory: D1, D2, S1, S2.
inline int64_t titans_mlp_floats(int64_t head_dim, int64_t hidden) { return 4 * head_dim * hidden; }

}  // namespace nexus
