// gpt2: LayerNorm with biases, learned positions (added at embedding time), fused QKV projection,
// GELU (tanh approximation), no RoPE.
#include <cmath>
#include <cstring>

#include "models/arch.h"
#include "models/forward.h"
#include "nexus/profile.h"
#include "ops/attention.h"
#include "ops/elementwise.h"

namespace nexus {
namespace {

Status read_gpt2_config(const GgufFile& f, ModelConfig* c) {
  c->rope = RopeStyle::kNone;
  c->norm_eps = static_cast<float>(f.get_float("gpt2.attention.layer_norm_epsilon").value_or(1e-5));
  if (c->head_dim * c->n_heads != c->dim)
    return Status::error(f.path() + ": gpt2 needs head_dim * heads == dim");
  return Status::ok();
}

std::vector<LayerSlot> gpt2_slots(const ModelConfig& c) {
  const int64_t kvw = c.n_kv_heads * c.head_dim;
  const int64_t fused = c.dim + 2 * kvw;
  return {
      {&LayerWeights::attn_norm, "blk.%d.attn_norm.weight", {c.dim}, true},
      {&LayerWeights::attn_norm_b, "blk.%d.attn_norm.bias", {c.dim}, true},
      {&LayerWeights::wqkv, "blk.%d.attn_qkv.weight", {fused, c.dim}, true},
      {&LayerWeights::bqkv, "blk.%d.attn_qkv.bias", {fused}, true},
      {&LayerWeights::wo, "blk.%d.attn_output.weight", {c.dim, c.dim}, true},
      {&LayerWeights::bo, "blk.%d.attn_output.bias", {c.dim}, true},
      {&LayerWeights::ffn_norm, "blk.%d.ffn_norm.weight", {c.dim}, true},
      {&LayerWeights::ffn_norm_b, "blk.%d.ffn_norm.bias", {c.dim}, true},
      {&LayerWeights::w_up, "blk.%d.ffn_up.weight", {c.ffn_dim, c.dim}, true},
      {&LayerWeights::b_up, "blk.%d.ffn_up.bias", {c.ffn_dim}, true},
      {&LayerWeights::w_down, "blk.%d.ffn_down.weight", {c.dim, c.ffn_dim}, true},
      {&LayerWeights::b_down, "blk.%d.ffn_down.bias", {c.dim}, true},
  };
}

std::vector<ModelSlot> gpt2_model_slots(const ModelConfig& c) {
  return {
      {&ModelWeights::tok_embd, "token_embd.weight", {c.n_vocab, c.dim}, true, false},
      {&ModelWeights::pos_embd, "position_embd.weight", {c.n_ctx_train, c.dim}, true, false},
      {&ModelWeights::out_norm, "output_norm.weight", {c.dim}, true, true},
      {&ModelWeights::out_norm_b, "output_norm.bias", {c.dim}, true, true},
      {&ModelWeights::output, "output.weight", {c.n_vocab, c.dim}, !c.tied_output, true},
  };
}

void gpt2_write_config(const ModelConfig& c, Metadata* out) {
  out->emplace_back("gpt2.attention.layer_norm_epsilon", gguf_f32(c.norm_eps));
}

void gpt2_forward(const Model& model, ForwardState& st) {
  const ModelConfig& c = model.config();
  const int64_t n = st.n, kvw = c.n_kv_heads * c.head_dim, fused = c.dim + 2 * kvw;
  AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window,
                     1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = model.weights().layers[l];
    NEXUS_PROFILE_LAYER(l);
    layer_norm(st.x, w.attn_norm.data_as<const float>(), w.attn_norm_b.data_as<const float>(),
               c.norm_eps, st.h, n, c.dim);
    linear(w.wqkv, w.bqkv, st.h, n, st.qkv, st, "attn_qkv");
    for (int64_t t = 0; t < n; ++t) {  // split the fused rows into q, k, v
      const float* r = st.qkv + t * fused;
      std::memcpy(st.q + t * c.dim, r, c.dim * sizeof(float));
      std::memcpy(st.k + t * kvw, r + c.dim, kvw * sizeof(float));
      std::memcpy(st.v + t * kvw, r + c.dim + kvw, kvw * sizeof(float));
    }
    store_kv(l, st);
    attention(st.q, *st.kv, l, st.seq, st.pos, n, ap, st.att, *st.pool, st.attn_scratch);
    linear(w.wo, w.bo, st.att, n, st.h, st, "attn_output");
    add_inplace(st.x, st.h, n * c.dim);

    layer_norm(st.x, w.ffn_norm.data_as<const float>(), w.ffn_norm_b.data_as<const float>(),
               c.norm_eps, st.h, n, c.dim);
    linear(w.w_up, w.b_up, st.h, n, st.a, st, "ffn_up");
    gelu_tanh(st.a, n * c.ffn_dim);
    linear(w.w_down, w.b_down, st.a, n, st.h, st, "ffn_down");
    add_inplace(st.x, st.h, n * c.dim);
  }
  output_head(model, st, /*layer_norm=*/true);
}

}  // namespace

const ArchSpec& gpt2_spec() {
  static const ArchSpec spec{"gpt2",           Arch::kGpt2,       read_gpt2_config, gpt2_slots,
                             gpt2_model_slots, gpt2_write_config, gpt2_forward};
  return spec;
}

}  // namespace nexus
