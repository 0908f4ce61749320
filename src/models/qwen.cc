// qwen2 (q/k/v biases) and qwen3 (per-head RMSNorm on q and k): the Llama block with NeoX RoPE.
#include "models/llama.h"

namespace nexus {
namespace {

Status read_qwen_config(const GgufFile& f, ModelConfig* c) {
  c->rope = RopeStyle::kNeox;
  c->norm_eps = static_cast<float>(
      f.get_float(c->arch_name + ".attention.layer_norm_rms_epsilon").value_or(1e-6));
  return Status::ok();
}

std::vector<LayerSlot> qwen2_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = llama_layer_slots(c);
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  s.push_back({&LayerWeights::bq, "blk.%d.attn_q.bias", {qw}, true});
  s.push_back({&LayerWeights::bk, "blk.%d.attn_k.bias", {kvw}, true});
  s.push_back({&LayerWeights::bv, "blk.%d.attn_v.bias", {kvw}, true});
  return s;
}

std::vector<LayerSlot> qwen3_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = llama_layer_slots(c);
  s.push_back({&LayerWeights::q_norm, "blk.%d.attn_q_norm.weight", {c.head_dim}, true});
  s.push_back({&LayerWeights::k_norm, "blk.%d.attn_k_norm.weight", {c.head_dim}, true});
  return s;
}

}  // namespace

const ArchSpec& qwen2_spec() {
  static const ArchSpec spec{"qwen2",           Arch::kQwen2,       read_qwen_config, qwen2_slots,
                             llama_model_slots, llama_write_config};
  return spec;
}

const ArchSpec& qwen3_spec() {
  static const ArchSpec spec{"qwen3",           Arch::kQwen3,       read_qwen_config, qwen3_slots,
                             llama_model_slots, llama_write_config};
  return spec;
}

}  // namespace nexus
