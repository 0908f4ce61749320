// nexus-ltm: the llama block whose attention works on segments and reads a long-term memory
// (Infini-attention's compressive memory or Titans' linear memory, ops/memory.h): each segment of
// memory.segment_length tokens attends to itself (causal, RoPE positions within the segment) and
// reads the memory the segments before it wrote; a learned gate per query head mixes the two
// (docs/MODELS.md). Our own architecture name, so its keys use the nexus-ltm prefix.
#include "models/llama.h"

namespace nexus {
namespace {

Status read_ltm_config(const GgufFile& f, ModelConfig* c) {
  c->rope = RopeStyle::kNormal;
  c->norm_eps = static_cast<float>(
      f.get_float(c->arch_name + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  const std::optional<int64_t> seg = f.get_int(c->arch_name + ".memory.segment_length");
  if (!seg || *seg <= 0 || *seg > (1 << 20))
    return Status::error(f.path() + ": " + c->arch_name +
                         ".memory.segment_length is missing or out of range");
  c->memory_segment = *seg;
  const std::string kind = f.get_string(c->arch_name + ".memory.kind").value_or("infini");
  if (kind != "infini" && kind != "titans")
    return Status::error(f.path() + ": " + c->arch_name + ".memory.kind is '" + kind +
                         "', expected 'infini' or 'titans'");
  c->memory_kind = kind == "titans" ? MemoryKind::kTitans : MemoryKind::kInfini;
  return Status::ok();
}

std::vector<LayerSlot> ltm_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = llama_layer_slots(c);
  s.push_back({&LayerWeights::memory_gate, "blk.%d.memory_gate", {c.n_heads}, true});
  if (c.memory_kind == MemoryKind::kTitans) {
    s.push_back({&LayerWeights::memory_eta, "blk.%d.memory_eta", {c.n_kv_heads}, true});
    s.push_back({&LayerWeights::memory_theta, "blk.%d.memory_theta", {c.n_kv_heads}, true});
    s.push_back({&LayerWeights::memory_alpha, "blk.%d.memory_alpha", {c.n_kv_heads}, true});
  }
  return s;
}

void write_ltm_config(const ModelConfig& c, Metadata* out) {
  llama_write_config(c, out);
  out->emplace_back("nexus-ltm.memory.segment_length",
                    gguf_u32(static_cast<uint32_t>(c.memory_segment)));
  out->emplace_back(
      "nexus-ltm.memory.kind",
      gguf_str(std::string(c.memory_kind == MemoryKind::kTitans ? "titans" : "infini")));
}

}  // namespace

const ArchSpec& ltm_spec() {
  static const ArchSpec spec{"nexus-ltm", Arch::kLtm,        read_ltm_config,
                             ltm_slots,   llama_model_slots, write_ltm_config};
  return spec;
}

}  // namespace nexus
