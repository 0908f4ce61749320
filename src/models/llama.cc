// llama: Llama 1/2/3, TinyLlama, SmolLM, llama2.c models. Normal (adjacent-pair) RoPE.
#include "models/llama.h"

#include <cmath>

#include "nexus/profile.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/rope.h"

namespace nexus {

std::vector<LayerSlot> llama_layer_slots(const ModelConfig& c) {
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  return {
      {&LayerWeights::attn_norm, "blk.%d.attn_norm.weight", {c.dim}, true},
      {&LayerWeights::wq, "blk.%d.attn_q.weight", {qw, c.dim}, true},
      {&LayerWeights::wk, "blk.%d.attn_k.weight", {kvw, c.dim}, true},
      {&LayerWeights::wv, "blk.%d.attn_v.weight", {kvw, c.dim}, true},
      {&LayerWeights::wo, "blk.%d.attn_output.weight", {c.dim, qw}, true},
      {&LayerWeights::ffn_norm, "blk.%d.ffn_norm.weight", {c.dim}, true},
      {&LayerWeights::w_gate, "blk.%d.ffn_gate.weight", {c.ffn_dim, c.dim}, true},
      {&LayerWeights::w_up, "blk.%d.ffn_up.weight", {c.ffn_dim, c.dim}, true},
      {&LayerWeights::w_down, "blk.%d.ffn_down.weight", {c.dim, c.ffn_dim}, true},
  };
}

void llama_forward(const Model& model, ForwardState& st) {
  const ModelConfig& c = model.config();
  const int64_t n = st.n;
  AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window,
                     1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = model.weights().layers[l];
    NEXUS_PROFILE_LAYER(l);
    rms_norm(st.x, w.attn_norm.data_as<const float>(), c.norm_eps, st.h, n, c.dim);
    linear_group({{&w.wq, &w.bq, st.q}, {&w.wk, &w.bk, st.k}, {&w.wv, &w.bv, st.v}}, st.h, n, st,
                 "attn_qkv");
    if (!w.q_norm.empty()) {
      rms_norm(st.q, w.q_norm.data_as<const float>(), c.norm_eps, st.q, n * c.n_heads, c.head_dim);
      rms_norm(st.k, w.k_norm.data_as<const float>(), c.norm_eps, st.k, n * c.n_kv_heads,
               c.head_dim);
    }
    rope_apply(st.q, n, c.n_heads, c.head_dim, c.rope_dim, c.rope, st.rope_cs);
    rope_apply(st.k, n, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, st.rope_cs);
    store_kv(l, st);
    attention(st.q, *st.kv, l, st.seq, st.pos, n, ap, st.att, *st.pool, st.attn_scratch);
    linear(w.wo, w.bo, st.att, n, st.h, st, "attn_output");
    add_inplace(st.x, st.h, n * c.dim);

    rms_norm(st.x, w.ffn_norm.data_as<const float>(), c.norm_eps, st.h, n, c.dim);
    const Tensor none;
    linear_group({{&w.w_gate, &none, st.a}, {&w.w_up, &none, st.b}}, st.h, n, st, "ffn_gate_up");
    swiglu(st.a, st.b, n * c.ffn_dim);
    linear(w.w_down, Tensor(), st.a, n, st.h, st, "ffn_down");
    add_inplace(st.x, st.h, n * c.dim);
  }
  output_head(model, st, /*layer_norm=*/false);
}

std::vector<ModelSlot> llama_model_slots(const ModelConfig& c) {
  return {
      {&ModelWeights::tok_embd, "token_embd.weight", {c.n_vocab, c.dim}, true, false},
      {&ModelWeights::out_norm, "output_norm.weight", {c.dim}, true, true},
      {&ModelWeights::output, "output.weight", {c.n_vocab, c.dim}, !c.tied_output, true},
  };
}

void llama_write_config(const ModelConfig& c, Metadata* out) {
  const std::string a = std::string(arch_spec(c.arch).name) + ".";
  out->emplace_back(a + "rope.freq_base", gguf_f32(c.rope_theta));
  out->emplace_back(a + "rope.dimension_count", gguf_u32(static_cast<uint32_t>(c.rope_dim)));
  out->emplace_back(a + "attention.layer_norm_rms_epsilon", gguf_f32(c.norm_eps));
}

namespace {

Status read_llama_config(const GgufFile& f, ModelConfig* c) {
  c->rope = RopeStyle::kNormal;
  c->norm_eps = static_cast<float>(
      f.get_float(c->arch_name + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  return Status::ok();
}

}  // namespace

const ArchSpec& llama_spec() {
  static const ArchSpec spec{"llama",           Arch::kLlama,      read_llama_config,
                             llama_layer_slots, llama_model_slots, llama_write_config,
                             llama_forward};
  return spec;
}

}  // namespace nexus
