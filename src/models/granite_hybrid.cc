// granitehybrid (IBM Granite 4.0-H, Bamba): Mamba-2 layers and attention layers, each followed by
// a SwiGLU feed-forward. A layer is state-space when its entry of the per-layer
// attention.head_count_kv array is 0, as llama.cpp reads it; rope.scaling.finetuned says whether
// the attention layers rotate (false: no positional encoding, Granite 4.0-H's choice). The
// attention layers are the transformer layer type, the others the Mamba block with the FFN.
#include "models/arch.h"
#include "models/llama.h"

namespace nexus {
namespace {

std::vector<LayerSlot> granite_hybrid_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = llama_layer_slots(c);
  for (LayerSlot& ls : s)
    if (ls.field == &LayerWeights::wq || ls.field == &LayerWeights::wk ||
        ls.field == &LayerWeights::wv || ls.field == &LayerWeights::wo)
      ls.kind = LayerKind::kAttention;
  for (LayerSlot& m : mamba2_mixer_slots(c)) {
    m.kind = LayerKind::kRecurrent;
    s.push_back(std::move(m));
  }
  return s;
}

Status read_granite_hybrid_config(const GgufFile& f, ModelConfig* c) {
  const std::string a = c->arch_name + ".";
  const std::string& p = f.path();
  NEXUS_RETURN_IF_ERROR(read_ssm_keys(f, c));
  c->norm_eps = static_cast<float>(
      f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  const std::vector<int64_t>* kv = f.get_int_array(a + "attention.head_count_kv");
  if (kv == nullptr || static_cast<int64_t>(kv->size()) != c->n_layers)
    return Status::error(p + ": " + a +
                         "attention.head_count_kv must be an array with one entry per layer "
                         "(0 for a state-space layer)");
  c->recurrent.assign(static_cast<size_t>(c->n_layers), 0);
  int64_t n_kv = 0;
  for (int64_t l = 0; l < c->n_layers; ++l) {
    const int64_t v = (*kv)[static_cast<size_t>(l)];
    if (v == 0) {
      c->recurrent[static_cast<size_t>(l)] = 1;
      continue;
    }
    if (v < 0 || (n_kv != 0 && v != n_kv))
      return Status::error(p + ": attention layers with different KV head counts (" +
                           std::to_string(n_kv) + ", " + std::to_string(v) +
                           ") are not supported");
    n_kv = v;
  }
  if (n_kv > 0 && c->n_heads % n_kv != 0)
    return Status::error(p + ": head_count " + std::to_string(c->n_heads) +
                         " is not a multiple of head_count_kv " + std::to_string(n_kv));
  c->n_kv_heads = n_kv;
  c->rope = f.get_int(a + "rope.scaling.finetuned").value_or(1) != 0 ? RopeStyle::kNormal
                                                                      : RopeStyle::kNone;
  // Granite's multipliers (a scaled embedding, residual branches and logits, a fixed attention
  // scale) are not implemented: a file that sets them is refused rather than run wrongly.
  for (const char* key : {"embedding_scale", "residual_scale", "logit_scale", "attention.scale"}) {
    const auto v = f.get_float(a + key);
    const bool neutral = !v || *v == 0.0 || (*v == 1.0 && std::string_view(key) != "attention.scale");
    if (!neutral)
      return Status::error(p + ": " + a + key + " = " + std::to_string(*v) +
                           " (Granite's multipliers) is not supported yet");
  }
  return Status::ok();
}

void write_granite_hybrid_config(const ModelConfig& c, Metadata* out) {
  const std::string a = std::string(arch_spec(c.arch).name) + ".";
  llama_write_config(c, out);
  write_ssm_keys(c, out);
  std::vector<int64_t> kv;
  for (int64_t l = 0; l < c.n_layers; ++l) kv.push_back(c.recurrent_layer(l) ? 0 : c.n_kv_heads);
  out->emplace_back(a + "attention.head_count_kv", gguf_i32_array(std::move(kv)));
  out->emplace_back(a + "rope.scaling.finetuned", gguf_bool(c.rope != RopeStyle::kNone));
}

}  // namespace

const ArchSpec& granite_hybrid_spec() {
  static const ArchSpec spec{"granitehybrid",   Arch::kGraniteHybrid, read_granite_hybrid_config,
                             granite_hybrid_slots, llama_model_slots, write_granite_hybrid_config};
  return spec;
}

}  // namespace nexus
