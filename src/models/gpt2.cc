// gpt2: its tensor table and metadata. LayerNorm with biases, learned positions (added at
// embedding time), fused QKV projection, GELU (tanh approximation), no RoPE; the block is the
// transformer layer type (models/transformer_layer.cc).
#include "models/arch.h"

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
  // (A tensor-parallel slice's heads fill only part of dim.)
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  const int64_t fused = qw + 2 * kvw;
  return {
      {&LayerWeights::attn_norm, "blk.%d.attn_norm.weight", {c.dim}, true},
      {&LayerWeights::attn_norm_b, "blk.%d.attn_norm.bias", {c.dim}, true},
      {&LayerWeights::wqkv, "blk.%d.attn_qkv.weight", {fused, c.dim}, true},
      {&LayerWeights::bqkv, "blk.%d.attn_qkv.bias", {fused}, true},
      {&LayerWeights::wo, "blk.%d.attn_output.weight", {c.dim, qw}, true},
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

}  // namespace

const ArchSpec& gpt2_spec() {
  static const ArchSpec spec{"gpt2",           Arch::kGpt2,       read_gpt2_config, gpt2_slots,
                             gpt2_model_slots, gpt2_write_config};
  return spec;
}

}  // namespace nexus
