// The transformer block: its inference forward over the KV cache, and its training passes:
// forward (saving what the backward reads), backward, and the recompute that rebuilds the cheap
// activations for a shared working set.
#include "models/transformer_layer.h"

#include <cmath>
#include <cstring>

#include "models/forward.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/memory.h"
#include "ops/rope.h"
#include "ops/train_ops.h"

namespace nexus {
namespace {

// The saved activations, in layout order. `mean*` are LayerNorm's (gpt2), `g` the SwiGLU gate;
// `u` is the up projection (gpt2: the GELU input), `hact` the FFN activation; qp/kp are qwen3's q
// and k before their per-head RMSNorm and rq/rk its 1/rms per head row.
// nexus-ltm: adot is the segment's own attention, ymem the memory's read (atty their gated mix),
// mem the memory before each segment, and qm/km the q and k before RoPE when the memory reads
// those.
enum Act {
  kMid,
  kLn1,
  kLn2,
  kRstd1,
  kRstd2,
  kMean1,
  kMean2,
  kQ,
  kAtty,
  kK,
  kV,
  kAtt,
  kQp,
  kKp,
  kRq,
  kRk,
  kG,
  kU,
  kHact,
  kAdot,
  kYmem,
  kMem,
  kQm,
  kKm
};
// The backward scratch: the FFN activation's gradient, llama's up gradient (its gate gradient and
// gpt2's up gradient reuse hact), the attention output's gradient, q/k/v's, and qwen3's q and k
// before their norm.
// nexus-ltm adds the memory read's gradient and the memory's gradients of q, k and v.
enum Scratch { kDhact, kDu, kDatty, kDq, kDk, kDv, kDqp, kDkp, kDymem, kDqm, kDkm, kDvm };

// The block's tensors (or their gradients). gpt2's fused QKV tensor is seen as wq, wk, wv (its
// row blocks) and its bias as bq, bk, bv; pointers an architecture lacks are null.
template <class F>
struct Weights {
  F *attn_norm, *attn_norm_b, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *wo, *bo;
  F *ffn_norm, *ffn_norm_b, *w_gate, *w_up, *b_up, *w_down, *b_down;
  F* memory_gate;  // nexus-ltm
  F *memory_eta, *memory_theta, *memory_alpha, *memory_w1, *memory_w2;  // nexus-ltm titans
};

template <class F, class Get>
Weights<F> bind(const ModelConfig& c, const Get& at) {
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  Weights<F> w{};
  w.attn_norm = at(&LayerWeights::attn_norm);
  w.attn_norm_b = at(&LayerWeights::attn_norm_b);
  if (F* qkv = at(&LayerWeights::wqkv)) {  // fused rows: q, then k, then v
    w.wq = qkv;
    w.wk = qkv + qw * c.dim;
    w.wv = w.wk + kvw * c.dim;
    F* bias = at(&LayerWeights::bqkv);
    w.bq = bias;
    w.bk = bias ? bias + qw : nullptr;
    w.bv = bias ? w.bk + kvw : nullptr;
  } else {
    w.wq = at(&LayerWeights::wq);
    w.wk = at(&LayerWeights::wk);
    w.wv = at(&LayerWeights::wv);
    w.bq = at(&LayerWeights::bq);
    w.bk = at(&LayerWeights::bk);
    w.bv = at(&LayerWeights::bv);
  }
  w.q_norm = at(&LayerWeights::q_norm);
  w.memory_gate = at(&LayerWeights::memory_gate);
  w.memory_eta = at(&LayerWeights::memory_eta);
  w.memory_theta = at(&LayerWeights::memory_theta);
  w.memory_alpha = at(&LayerWeights::memory_alpha);
  w.memory_w1 = at(&LayerWeights::memory_w1);
  w.memory_w2 = at(&LayerWeights::memory_w2);
  w.k_norm = at(&LayerWeights::k_norm);
  w.wo = at(&LayerWeights::wo);
  w.bo = at(&LayerWeights::bo);
  w.ffn_norm = at(&LayerWeights::ffn_norm);
  w.ffn_norm_b = at(&LayerWeights::ffn_norm_b);
  w.w_gate = at(&LayerWeights::w_gate);
  w.w_up = at(&LayerWeights::w_up);
  w.b_up = at(&LayerWeights::b_up);
  w.w_down = at(&LayerWeights::w_down);
  w.b_down = at(&LayerWeights::b_down);
  return w;
}

Weights<const float> weights(const LayerPass& p) {
  return bind<const float>(*p.cfg, [&](Tensor LayerWeights::*f) { return p.weight(f); });
}
Weights<float> grads(const LayerPass& p) {
  return bind<float>(*p.cfg, [&](Tensor LayerWeights::*f) { return p.grad(f); });
}

struct Dims {
  int64_t t, n, d, f, qw, kvw;  // seq, rows, dim, ffn, query width, key/value width
  AttnShape as;
};

// Attention's sequences: the batch's, or (nexus-ltm) its segments.
AttnShape attn_shape(const ModelConfig& c, int64_t b, int64_t t) {
  const int64_t s = c.memory_segment;
  if (s == 0) return {b, t, c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window};
  NEXUS_CHECK(t % s == 0, "[nexus-ltm] a training sequence of " + std::to_string(t) +
                              " tokens is not a whole number of segments of " + std::to_string(s));
  return {b * (t / s), s, c.n_heads, c.n_kv_heads, c.head_dim, 0};
}

Dims dims(const LayerPass& p) {
  const ModelConfig& c = *p.cfg;
  return {p.t,
          p.n(),
          c.dim,
          c.ffn_dim,
          c.n_heads * c.head_dim,
          c.n_kv_heads * c.head_dim,
          attn_shape(c, p.b, p.t)};
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A layer's Titans parameters (null for Infini): the rates' logits per kv head (eta, theta,
// alpha) and the deep memory's initial weights (null for the linear memory); or their gradients.
template <class F>
struct LtmParams {
  F *eta, *theta, *alpha, *w1, *w2;
};

// nexus-ltm's memory op of the config's kind over rows q, k, v of b sequences of t tokens: reads
// into y (q null: none), writes unless !write, the memory before each segment into `saved` (or
// null), starting from and leaving `state` (or zeros).
struct LtmCall {
  const ModelConfig& c;
  LtmParams<const float> w;
  // Titans' sigmoids: eta, theta, alpha per kv head, in a per-thread buffer (a call per layer
  // and token at decode: no allocation once warm; one call is live at a time on a thread).
  float* rates = nullptr;
  // Slot reduction (inference): this layer's projection (null for the deep memory) and slots (the
  // deep memory's hidden units).
  const float* proj = nullptr;
  int64_t slots = 0;

  LtmCall(const ModelConfig& cfg, const LtmParams<const float>& params,
          const float* slot_proj = nullptr, int64_t n_slots = 0)
      : c(cfg), w(params), proj(slot_proj), slots(n_slots) {
    if (c.memory_kind != MemoryKind::kTitans) return;
    const int64_t kv = c.n_kv_heads;
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(3 * kv));
    rates = buf.data();
    for (int64_t g = 0; g < kv; ++g) {
      rates[g] = sigmoid(w.eta[g]);
      rates[kv + g] = sigmoid(w.theta[g]);
      rates[2 * kv + g] = sigmoid(w.alpha[g]);
    }
  }
  bool deep() const { return c.memory_hidden > 0; }
  TitansArgs titans(const float* q, const float* k, const float* v, float* y, float* saved,
                    float* state, int64_t b, int64_t t, bool write) const {
    const int64_t kv = c.n_kv_heads;
    TitansArgs a{q,
                 k,
                 v,
                 y,
                 rates,
                 rates + kv,
                 rates + 2 * kv,
                 saved,
                 state,
                 b,
                 t,
                 c.memory_segment,
                 c.n_heads,
                 kv,
                 c.head_dim};
    a.write = write;
    a.proj = proj;
    a.slots = slots;
    return a;
  }
  TitansMlpArgs titans_mlp(const float* q, const float* k, const float* v, float* y, float* saved,
                           float* state, int64_t b, int64_t t, bool write) const {
    const int64_t kv = c.n_kv_heads;
    TitansMlpArgs a{q,
                    k,
                    v,
                    y,
                    rates,
                    rates + kv,
                    rates + 2 * kv,
                    w.w1,
                    w.w2,
                    saved,
                    state,
                    b,
                    t,
                    c.memory_segment,
                    c.n_heads,
                    kv,
                    c.head_dim,
                    slots > 0 ? slots : c.memory_hidden};
    a.write = write;
    return a;
  }
  MemoryArgs infini(const float* q, const float* k, const float* v, float* y, float* saved,
                    float* state, int64_t b, int64_t t, bool write) const {
    MemoryArgs a{q,         k, v, y, saved, state, b, t, c.memory_segment, c.n_heads, c.n_kv_heads,
                 c.head_dim};
    a.write = write;
    a.proj = proj;
    a.slots = slots;
    return a;
  }
  void forward(const float* q, const float* k, const float* v, float* y, float* saved, float* state,
               int64_t b, int64_t t, bool write, ThreadPool* pool) const {
    if (c.memory_kind != MemoryKind::kTitans)
      memory_forward(infini(q, k, v, y, saved, state, b, t, write), pool);
    else if (deep())
      titans_mlp_forward(titans_mlp(q, k, v, y, saved, state, b, t, write), pool);
    else
      titans_forward(titans(q, k, v, y, saved, state, b, t, write), pool);
  }
  // The backward of a training forward (reads and writes from the initial memory); Titans'
  // parameters' gradients (the rates' logits', the initial weights') added to `gw`.
  void backward(const float* q, const float* k, const float* v, float* saved, int64_t b, int64_t t,
                const float* dy, float* dq, float* dk, float* dv, const LtmParams<float>& gw,
                ThreadPool* pool) const {
    if (c.memory_kind != MemoryKind::kTitans) {
      memory_backward({infini(q, k, v, nullptr, saved, nullptr, b, t, true), dy, dq, dk, dv}, pool);
      return;
    }
    const int64_t kv = c.n_kv_heads;
    std::vector<float> dr(static_cast<size_t>(3 * kv), 0.0f);
    if (deep())
      titans_mlp_backward({titans_mlp(q, k, v, nullptr, saved, nullptr, b, t, true), dy, dq, dk, dv,
                           dr.data(), dr.data() + kv, dr.data() + 2 * kv, gw.w1, gw.w2},
                          pool);
    else
      titans_backward({titans(q, k, v, nullptr, saved, nullptr, b, t, true), dy, dq, dk, dv,
                       dr.data(), dr.data() + kv, dr.data() + 2 * kv},
                      pool);
    float* out[] = {gw.eta, gw.theta, gw.alpha};
    for (int64_t g = 0; g < kv; ++g)  // through the sigmoids
      for (int r = 0; r < 3; ++r) {
        const float s = rates[r * kv + g];
        out[r][g] += dr[r * kv + g] * s * (1.0f - s);
      }
  }
};

template <class F>
LtmParams<F> ltm_params(const Weights<F>& w) {
  return {w.memory_eta, w.memory_theta, w.memory_alpha, w.memory_w1, w.memory_w2};
}

// atty = g ymem + (1 - g) adot per query head, g = sigmoid(gate[h]).
void gate_mix(float* atty, const float* ymem, const float* adot, const float* gate, int64_t n,
              int64_t heads, int64_t d) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const float g = sigmoid(gate[h]);
      const int64_t o = (i * heads + h) * d;
      for (int64_t x = 0; x < d; ++x) atty[o + x] = g * ymem[o + x] + (1.0f - g) * adot[o + x];
    }
}

const float* vec(const Tensor& t) { return t.empty() ? nullptr : t.data_as<const float>(); }

// Inference, llama/qwen shape: RMSNorm, separate Q/K/V projections (optional biases) as one
// matmul group, optional per-head q/k RMSNorm (qwen3), RoPE, the KV store, attention over the
// cache, output projection; RMSNorm, SwiGLU.
// Tensor parallelism: this rank's slice of the output projection's product, summed over the ranks
// (the bias once, by rank 0) into st.h.
const Tensor& lead_bias(const Tensor& b, TensorParallel* tp) {
  static const Tensor none;
  return tp == nullptr || tp->rank() == 0 ? b : none;
}
void sum_partial(float* y, int64_t count, TensorParallel* tp) {
  if (tp != nullptr) tp->all_reduce_sum(y, count);
}

// nexus-ltm's memory op over the batch's rows of layer l.
LtmCall ltm_call(const ModelConfig& c, const LayerWeights& w, int64_t l) {
  return LtmCall(c,
                 {vec(w.memory_eta), vec(w.memory_theta), vec(w.memory_alpha), vec(w.memory_w1),
                  vec(w.memory_w2)},
                 vec(w.memory_proj), c.memory_slots_at(l));
}

// nexus-ltm: the batch's reads of each sequence's memory into st.mem (mixed into the attention by
// infer_gated), as it was before their segment. Called with st.q and st.k before or after RoPE,
// as the model's memory reads them; before RoPE, the keys are kept for the segment's write.
void ltm_memory_read(const ModelConfig& c, const LayerWeights& w, int64_t l, ForwardState& st) {
  NEXUS_CHECK(st.ltm != nullptr && st.mem != nullptr, "[nexus-ltm] no memory state in the context");
  const int64_t n = st.n, qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  const LtmCall mem = ltm_call(c, w, l);
  // Runs of one sequence's tokens: the rounds of Context::decode hold one segment of each.
  for (int64_t i0 = 0; i0 < n;) {
    int64_t i1 = i0 + 1;
    while (i1 < n && st.seq[i1] == st.seq[i0]) ++i1;
    mem.forward(st.q + i0 * qw, nullptr, nullptr, st.mem + i0 * qw, nullptr,
                st.ltm->memory(l, st.seq[i0]), 1, i1 - i0, /*write=*/false, st.pool);
    i0 = i1;
  }
  if (c.memory_before_rope)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(st.ltm->keys(l, st.seq[i]) + st.pos[i] * kvw, st.k + i * kvw,
                  kvw * sizeof(float));
}

// nexus-ltm, after the batch's keys and values are in the cache: each sequence whose segment its
// last token completed writes it into the memory (training's segments, a token at a time). The
// values, and the keys unless the memory reads them unrotated, come from the cache: exactly
// training's with an f32 cache, rounded as the attention reads them otherwise.
void ltm_memory_write(const ModelConfig& c, const LayerWeights& w, int64_t l, ForwardState& st) {
  const int64_t seg = c.memory_segment, kvw = c.n_kv_heads * c.head_dim;
  thread_local std::vector<float> keys, values;
  for (int64_t i = 0; i < st.n; ++i) {
    if (st.pos[i] + 1 < seg) continue;
    const int s = st.seq[i];
    const int64_t kl = st.kv_index(l);
    values.resize(static_cast<size_t>(seg * kvw));
    st.kv->load_v_rows(kl, s, 0, static_cast<int32_t>(seg), values.data());
    const float* k = st.ltm->keys(l, s);
    if (k == nullptr) {
      keys.resize(static_cast<size_t>(seg * kvw));
      st.kv->load_k_rows(kl, s, 0, static_cast<int32_t>(seg), keys.data());
      k = keys.data();
    }
    ltm_call(c, w, l).forward(nullptr, k, values.data(), nullptr, nullptr, st.ltm->memory(l, s), 1,
                              seg, /*write=*/true, st.pool);
  }
}

void infer_gated(const ModelConfig& c, const LayerWeights& w, int64_t l, ForwardState& st,
                 TensorParallel* tp) {
  const int64_t n = st.n;
  const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window,
                           1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  rms_norm(st.x, vec(w.attn_norm), c.norm_eps, st.h, n, c.dim);
  linear_group({{&w.wq, &w.bq, st.q}, {&w.wk, &w.bk, st.k}, {&w.wv, &w.bv, st.v}}, st.h, n, st,
               "attn_qkv");
  if (!w.q_norm.empty()) {
    rms_norm(st.q, vec(w.q_norm), c.norm_eps, st.q, n * c.n_heads, c.head_dim);
    rms_norm(st.k, vec(w.k_norm), c.norm_eps, st.k, n * c.n_kv_heads, c.head_dim);
  }
  if (c.memory_segment && c.memory_before_rope) ltm_memory_read(c, w, l, st);
  if (c.rope != RopeStyle::kNone) {  // granitehybrid may have no positional encoding
    rope_apply(st.q, n, c.n_heads, c.head_dim, c.rope_dim, c.rope, st.rope_cs);
    rope_apply(st.k, n, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, st.rope_cs);
  }
  store_kv(l, st);
  attention(st.q, *st.kv, st.kv_index(l), st.seq, st.pos, n, ap, st.att, *st.pool, st.attn_scratch);
  if (c.memory_segment) {
    if (!c.memory_before_rope) ltm_memory_read(c, w, l, st);
    ltm_memory_write(c, w, l, st);
    gate_mix(st.att, st.mem, st.att, w.memory_gate.data_as<const float>(), n, c.n_heads,
             c.head_dim);
  }
  linear(w.wo, lead_bias(w.bo, tp), st.att, n, st.h, st, "attn_output");
  sum_partial(st.h, n * c.dim, tp);
  add_inplace(st.x, st.h, n * c.dim);
  swiglu_ffn_infer(c, w, st, tp);
}

// Inference, gpt2 shape: LayerNorm with bias, the fused QKV projection split into q, k, v, no
// RoPE, attention over the cache, output projection with bias; LayerNorm, GELU MLP with biases.
void infer_fused(const ModelConfig& c, const LayerWeights& w, int64_t l, ForwardState& st,
                 TensorParallel* tp) {
  const int64_t n = st.n, kvw = c.n_kv_heads * c.head_dim, qw = c.n_heads * c.head_dim;
  const int64_t fused = qw + 2 * kvw;
  const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window,
                           1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  layer_norm(st.x, vec(w.attn_norm), vec(w.attn_norm_b), c.norm_eps, st.h, n, c.dim);
  linear(w.wqkv, w.bqkv, st.h, n, st.qkv, st, "attn_qkv");
  for (int64_t t = 0; t < n; ++t) {  // split the fused rows into q, k, v
    const float* r = st.qkv + t * fused;
    std::memcpy(st.q + t * qw, r, qw * sizeof(float));
    std::memcpy(st.k + t * kvw, r + qw, kvw * sizeof(float));
    std::memcpy(st.v + t * kvw, r + qw + kvw, kvw * sizeof(float));
  }
  store_kv(l, st);
  attention(st.q, *st.kv, st.kv_index(l), st.seq, st.pos, n, ap, st.att, *st.pool, st.attn_scratch);
  linear(w.wo, lead_bias(w.bo, tp), st.att, n, st.h, st, "attn_output");
  sum_partial(st.h, n * c.dim, tp);
  add_inplace(st.x, st.h, n * c.dim);

  layer_norm(st.x, vec(w.ffn_norm), vec(w.ffn_norm_b), c.norm_eps, st.h, n, c.dim);
  linear(w.w_up, w.b_up, st.h, n, st.a, st, "ffn_up");
  gelu_tanh(st.a, n * c.ffn_dim);
  linear(w.w_down, lead_bias(w.b_down, tp), st.a, n, st.h, st, "ffn_down");
  sum_partial(st.h, n * c.dim, tp);
  add_inplace(st.x, st.h, n * c.dim);
}

// The saved attention probabilities: [b, heads, t, t], or per segment (nexus-ltm).
int64_t att_floats(const ModelConfig& c, int64_t b, int64_t t) {
  const int64_t s = c.memory_segment;
  return s ? b * c.n_heads * memory_segments(t, s) * s * s : b * c.n_heads * t * t;
}

class TransformerLayer final : public LayerType {
 public:
  void infer(const Model& model, int64_t l, ForwardState& st) const override {
    const LayerWeights& w = model.weights().layers[l];
    if (w.wqkv.empty())
      infer_gated(model.config(), w, l, st, model.tensor_parallel());
    else
      infer_fused(model.config(), w, l, st, model.tensor_parallel());
  }

  std::vector<SavedSlot> saved(const ModelConfig& c, int64_t b, int64_t t) const override {
    const int64_t n = b * t, d = c.dim, f = c.ffn_dim;
    const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
    const bool ln = c.arch == Arch::kGpt2, qk = c.arch == Arch::kQwen3;
    const bool gated = c.arch != Arch::kGpt2;
    return {
        {"mid", n * d, Saved::kStat},
        {"ln1", n * d, Saved::kWork},
        {"ln2", n * d, Saved::kWork},
        {"rstd1", n, Saved::kStat},
        {"rstd2", n, Saved::kStat},
        {"mean1", ln ? n : 0, Saved::kStat},
        {"mean2", ln ? n : 0, Saved::kStat},
        {"q", n * qw, Saved::kInput},
        {"atty", n * qw, Saved::kOutput},
        {"k", n * kvw, Saved::kInput},
        {"v", n * kvw, Saved::kInput},
        {"att", att_floats(c, b, t), Saved::kOutput},
        {"qp", qk ? n * qw : 0, Saved::kInput},
        {"kp", qk ? n * kvw : 0, Saved::kInput},
        {"rq", qk ? n * c.n_heads : 0, Saved::kStat},
        {"rk", qk ? n * c.n_kv_heads : 0, Saved::kStat},
        {"g", gated ? n * f : 0, Saved::kInput},
        {"u", n * f, Saved::kInput},
        {"hact", n * f, Saved::kWork},
        {"adot", c.memory_segment ? n * qw : 0, Saved::kOutput},
        {"ymem", c.memory_segment ? n * qw : 0, Saved::kInput},
        {"mem",
         c.memory_segment
             // (training has no slot reduction: layer 0's size is every layer's)
             ? b * memory_segments(t, c.memory_segment) * c.n_kv_heads * ltm_head_floats(c, 0)
             : 0,
         Saved::kStat},
        {"qm", c.memory_before_rope ? n * qw : 0, Saved::kInput},
        {"km", c.memory_before_rope ? n * kvw : 0, Saved::kInput},
    };
  }

  std::vector<ScratchSlot> scratch(const ModelConfig& c, int64_t b, int64_t t) const override {
    const int64_t n = b * t, f = c.ffn_dim;
    const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
    const bool qk = c.arch == Arch::kQwen3;
    return {{"dhact", n * f},
            {"du", c.arch == Arch::kGpt2 ? 0 : n * f},
            {"datty", n * qw},
            {"dq", n * qw},
            {"dk", n * kvw},
            {"dv", n * kvw},
            {"dqp", qk ? n * qw : 0},
            {"dkp", qk ? n * kvw : 0},
            {"dymem", c.memory_segment ? n * qw : 0},
            {"dqm", c.memory_segment ? n * qw : 0},
            {"dkm", c.memory_segment ? n * kvw : 0},
            {"dvm", c.memory_segment ? n * kvw : 0}};
  }

  void forward(const LayerPass& p) const override {
    const ModelConfig& c = *p.cfg;
    const auto [t, n, d, f, qw, kvw, as] = dims(p);
    const Weights<const float> w = weights(p);
    float* const* a = p.a;
    ThreadPool* pool = p.pool;
    const bool bf16 = p.bf16_ops;
    norm_forward(c, a[kLn1], a[kMean1], a[kRstd1], p.x, w.attn_norm, w.attn_norm_b, n, pool);
    p.keep_only(a[kLn1], n * d);  // recomputed by recompute()
    // Biases and residuals go in as the GEMMs' starting values (matmul_forward's add_rows, bias).
    // qwen3: q and k land before their per-head RMSNorm, which writes the normed q and k.
    const bool qk = w.q_norm != nullptr;
    matmul_forward(qk ? a[kQp] : a[kQ], a[kLn1], w.wq, n, d, qw, pool, bf16, nullptr, w.bq);
    matmul_forward(qk ? a[kKp] : a[kK], a[kLn1], w.wk, n, d, kvw, pool, bf16, nullptr, w.bk);
    matmul_forward(a[kV], a[kLn1], w.wv, n, d, kvw, pool, bf16, nullptr, w.bv);
    if (qk) {
      // Rounded (and kept in 16 bits) before the norm reads them, so a block restored for its
      // backward holds the same values.
      p.keep(kQp, n * qw);
      p.keep(kKp, n * kvw);
      rmsnorm_forward(a[kQ], a[kRq], a[kQp], w.q_norm, n * c.n_heads, c.head_dim, c.norm_eps,
                      pool);
      rmsnorm_forward(a[kK], a[kRk], a[kKp], w.k_norm, n * c.n_kv_heads, c.head_dim, c.norm_eps,
                      pool);
    }
    const bool mem_plain = c.memory_segment && c.memory_before_rope;
    if (mem_plain) {  // the memory's q and k, before RoPE turns them
      std::memcpy(a[kQm], a[kQ], n * qw * sizeof(float));
      std::memcpy(a[kKm], a[kK], n * kvw * sizeof(float));
      p.keep(kQm, n * qw);
      p.keep(kKm, n * kvw);
    }
    if (c.rope != RopeStyle::kNone) {  // (nexus-ltm: positions within the segment)
      rope_rotate(a[kQ], n, as.t, c.n_heads, c.head_dim, c.rope_dim, c.rope, p.rope_cs, false,
                  pool);
      rope_rotate(a[kK], n, as.t, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, p.rope_cs, false,
                  pool);
    }
    p.keep(kQ, n * qw);
    p.keep(kK, n * kvw);
    p.keep(kV, n * kvw);
    if (c.memory_segment) {
      // Each segment's own attention, the read of the memory the segments before it wrote, and
      // their gated mix.
      attention_forward(a[kAdot], a[kAtt], a[kQ], a[kK], a[kV], as, pool);
      LtmCall(c, ltm_params(w))
          .forward(mem_plain ? a[kQm] : a[kQ], mem_plain ? a[kKm] : a[kK], a[kV], a[kYmem], a[kMem],
                   nullptr, p.b, p.t, true, pool);
      p.keep(kAtt, as.b * c.n_heads * as.t * as.t);
      p.keep(kAdot, n * qw);
      p.keep(kYmem, n * qw);
      gate_mix(a[kAtty], a[kYmem], a[kAdot], w.memory_gate, n, c.n_heads, c.head_dim);
    } else {
      attention_forward(a[kAtty], a[kAtt], a[kQ], a[kK], a[kV], as, pool);
      p.keep(kAtt, as.b * c.n_heads * t * t);
    }
    p.keep(kAtty, n * qw);
    // The projections are written where their sum with the residual goes (no scratch). Tensor
    // parallel: each rank's partial product, rank 0's with the residual and the bias, summed.
    const bool lead = p.tp == nullptr || p.tp->rank() == 0;
    matmul_forward(a[kMid], a[kAtty], w.wo, n, qw, d, pool, bf16, lead ? p.x : nullptr,
                   lead ? w.bo : nullptr);
    if (p.tp) p.tp->all_reduce_sum(a[kMid], n * d);
    norm_forward(c, a[kLn2], a[kMean2], a[kRstd2], a[kMid], w.ffn_norm, w.ffn_norm_b, n, pool);
    p.keep_only(a[kLn2], n * d);
    if (w.w_gate) {  // SwiGLU
      matmul_forward(a[kG], a[kLn2], w.w_gate, n, d, f, pool, bf16);
      matmul_forward(a[kU], a[kLn2], w.w_up, n, d, f, pool, bf16);
      p.keep(kG, n * f);
      p.keep(kU, n * f);
      swiglu_forward(a[kHact], a[kG], a[kU], n * f, pool);
    } else {  // GELU MLP
      matmul_forward(a[kU], a[kLn2], w.w_up, n, d, f, pool, bf16, nullptr, w.b_up);
      p.keep(kU, n * f);
      gelu_forward(a[kHact], a[kU], n * f, pool);
    }
    p.keep_only(a[kHact], n * f);
    if (p.y) {
      matmul_forward(p.y, a[kHact], w.w_down, n, f, d, pool, bf16, lead ? a[kMid] : nullptr,
                     lead ? w.b_down : nullptr);
      if (p.tp) p.tp->all_reduce_sum(p.y, n * d);
    }
  }

  void backward(const LayerPass& p) const override {
    const ModelConfig& c = *p.cfg;
    const auto [t, n, d, f, qw, kvw, as] = dims(p);
    const Weights<const float> w = weights(p);
    const Weights<float> gw = grads(p);
    float* const* a = p.a;
    float* const* s = p.scratch;
    ThreadPool* pool = p.pool;
    const bool bf16 = p.bf16_ops;
    // Feed-forward half: out = mid + act(ln2) Wd (+ bd), ln2 = norm(mid); dres holds d / d out,
    // which is also the gradient of the down projection's output.
    p.zero(s[kDhact], n * f);
    matmul_backward(s[kDhact], gw.w_down, p.dres, a[kHact], w.w_down, n, f, d, pool, bf16,
                    gw.b_down);
    p.round_grad(s[kDhact], n * f);
    // hact is dead now: it takes the gate gradient (SwiGLU) or the up gradient (GELU).
    float* du = w.w_gate ? s[kDu] : a[kHact];  // written (not added to) by the activation's backward
    p.zero(p.dln, n * d);
    if (w.w_gate) {
      swiglu_backward(a[kHact], du, s[kDhact], a[kG], a[kU], n * f, pool);
      p.round_grad(a[kHact], n * f);
      p.round_grad(du, n * f);
      matmul_backward(p.dln, gw.w_gate, a[kHact], a[kLn2], w.w_gate, n, d, f, pool, bf16);
    } else {
      gelu_backward(du, s[kDhact], a[kU], n * f, pool);
      p.round_grad(du, n * f);
    }
    matmul_backward(p.dln, gw.w_up, du, a[kLn2], w.w_up, n, d, f, pool, bf16, gw.b_up);
    if (p.tp) p.tp->all_reduce_sum(p.dln, n * d);  // each rank's share of the width's gradient
    p.round_grad(p.dln, n * d);
    norm_backward(c, p.dres, gw.ffn_norm, gw.ffn_norm_b, p.dln, a[kMid], w.ffn_norm, a[kMean2],
                  a[kRstd2], n, pool);
    p.round_grad(p.dres, n * d);
    // Attention half: mid = x + attn(rope(ln1 Wq + bq), rope(ln1 Wk + bk), ln1 Wv + bv) Wo + bo.
    p.zero(s[kDatty], n * qw);
    matmul_backward(s[kDatty], gw.wo, p.dres, a[kAtty], w.wo, n, qw, d, pool, bf16, gw.bo);
    p.round_grad(s[kDatty], n * qw);
    if (c.memory_segment) {
      // The gate: d ymem = g datty, d adot = (1 - g) datty (in place), d gate = sum datty
      // (ymem - adot) g (1 - g).
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const float g = sigmoid(w.memory_gate[h]);
        double dg = 0;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t o = (i * c.n_heads + h) * c.head_dim;
          for (int64_t x = 0; x < c.head_dim; ++x) {
            const float dy = s[kDatty][o + x];
            dg += static_cast<double>(dy) * (a[kYmem][o + x] - a[kAdot][o + x]);
            s[kDymem][o + x] = g * dy;
            s[kDatty][o + x] = (1.0f - g) * dy;
          }
        }
        gw.memory_gate[h] += static_cast<float>(dg) * g * (1.0f - g);
      }
      attention_backward(s[kDq], s[kDk], s[kDv], s[kDatty], a[kAtt], a[kQ], a[kK], a[kV], as,
                         p.attn_scratch, pool);
      const bool plain = c.memory_before_rope;
      LtmCall(c, ltm_params(w))
          .backward(plain ? a[kQm] : a[kQ], plain ? a[kKm] : a[kK], a[kV], a[kMem], p.b, p.t,
                    s[kDymem], s[kDqm], s[kDkm], s[kDvm], ltm_params(gw), pool);
      if (!plain) {  // (before RoPE: added once the rotation is undone, below)
        add_inplace(s[kDq], s[kDqm], n * qw);
        add_inplace(s[kDk], s[kDkm], n * kvw);
      }
      add_inplace(s[kDv], s[kDvm], n * kvw);
    } else {
      attention_backward(s[kDq], s[kDk], s[kDv], s[kDatty], a[kAtt], a[kQ], a[kK], a[kV], as,
                         p.attn_scratch, pool);
    }
    if (c.rope != RopeStyle::kNone) {
      rope_rotate(s[kDq], n, as.t, c.n_heads, c.head_dim, c.rope_dim, c.rope, p.rope_cs, true,
                  pool);
      rope_rotate(s[kDk], n, as.t, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, p.rope_cs, true,
                  pool);
    }
    if (c.memory_segment && c.memory_before_rope) {
      add_inplace(s[kDq], s[kDqm], n * qw);
      add_inplace(s[kDk], s[kDkm], n * kvw);
    }
    float *dq = s[kDq], *dk = s[kDk];
    if (w.q_norm != nullptr) {  // qwen3: back through the per-head norms of q and k
      p.zero(s[kDqp], n * qw);
      p.zero(s[kDkp], n * kvw);
      rmsnorm_backward(s[kDqp], gw.q_norm, s[kDq], a[kQp], w.q_norm, a[kRq], n * c.n_heads,
                       c.head_dim, pool);
      rmsnorm_backward(s[kDkp], gw.k_norm, s[kDk], a[kKp], w.k_norm, a[kRk], n * c.n_kv_heads,
                       c.head_dim, pool);
      dq = s[kDqp];
      dk = s[kDkp];
    }
    p.round_grad(dq, n * qw);
    p.round_grad(dk, n * kvw);
    p.round_grad(s[kDv], n * kvw);
    p.zero(p.dln, n * d);
    matmul_backward(p.dln, gw.wq, dq, a[kLn1], w.wq, n, d, qw, pool, bf16, gw.bq);
    matmul_backward(p.dln, gw.wk, dk, a[kLn1], w.wk, n, d, kvw, pool, bf16, gw.bk);
    matmul_backward(p.dln, gw.wv, s[kDv], a[kLn1], w.wv, n, d, kvw, pool, bf16, gw.bv);
    if (p.tp) p.tp->all_reduce_sum(p.dln, n * d);  // each rank's heads' share
    p.round_grad(p.dln, n * d);
    norm_backward(c, p.dres, gw.attn_norm, gw.attn_norm_b, p.dln, p.x, w.attn_norm, a[kMean1],
                  a[kRstd1], n, pool);
    p.round_grad(p.dres, n * d);
  }

  void recompute(const LayerPass& p, bool selective) const override {
    const ModelConfig& c = *p.cfg;
    const auto [t, n, d, f, qw, kvw, as] = dims(p);
    const Weights<const float> w = weights(p);
    float* const* a = p.a;
    // As forward() computed them (the norms also rewrite their statistics with the same values).
    norm_forward(c, a[kLn1], a[kMean1], a[kRstd1], p.x, w.attn_norm, w.attn_norm_b, n, p.pool);
    p.keep_only(a[kLn1], n * d);
    norm_forward(c, a[kLn2], a[kMean2], a[kRstd2], a[kMid], w.ffn_norm, w.ffn_norm_b, n, p.pool);
    p.keep_only(a[kLn2], n * d);
    if (a[kG])
      swiglu_forward(a[kHact], a[kG], a[kU], n * f, p.pool);
    else
      gelu_forward(a[kHact], a[kU], n * f, p.pool);
    p.keep_only(a[kHact], n * f);
    if (selective) {
      // The probabilities and output from the block's (rounded) q, k and v, by the forward's own
      // op (which rounds them only after computing both, as here).
      attention_forward(c.memory_segment ? a[kAdot] : a[kAtty], a[kAtt], a[kQ], a[kK], a[kV], as,
                        p.pool);
      p.keep_only(a[kAtt], as.b * c.n_heads * as.t * as.t);
      if (c.memory_segment) {  // mixed again with the kept memory read
        p.keep_only(a[kAdot], n * qw);
        gate_mix(a[kAtty], a[kYmem], a[kAdot], weights(p).memory_gate, n, c.n_heads, c.head_dim);
      }
      p.keep_only(a[kAtty], n * qw);
    }
  }
};

}  // namespace

const LayerType& transformer_layer() {
  static const TransformerLayer layer;
  return layer;
}

void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_forward(out, mean, rstd, x, w, b, n, c.dim, c.norm_eps, pool);
  else
    rmsnorm_forward(out, rstd, x, w, n, c.dim, c.norm_eps, pool);
}

void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd, int64_t n,
                   ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, n, c.dim, pool);
  else
    rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c.dim, pool);
}

void swiglu_ffn_infer(const ModelConfig& c, const LayerWeights& w, ForwardState& st,
                      TensorParallel* tp) {
  const int64_t n = st.n;
  rms_norm(st.x, w.ffn_norm.data_as<const float>(), c.norm_eps, st.h, n, c.dim);
  const Tensor none;
  linear_group({{&w.w_gate, &none, st.a}, {&w.w_up, &none, st.b}}, st.h, n, st, "ffn_gate_up");
  swiglu(st.a, st.b, n * c.ffn_dim);
  linear(w.w_down, Tensor(), st.a, n, st.h, st, "ffn_down");
  sum_partial(st.h, n * c.dim, tp);
  add_inplace(st.x, st.h, n * c.dim);
}

}  // namespace nexus
