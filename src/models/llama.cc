// llama: Llama 1/2/3, TinyLlama, SmolLM, llama2.c models: its tensor table and metadata. Normal
// (adjacent-pair) RoPE; the block is the transformer layer type (models/transformer_layer.cc).
#include "models/llama.h"


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
                             llama_layer_slots, llama_model_slots, llama_write_config};
  return spec;
}

}  // namespace nexus
