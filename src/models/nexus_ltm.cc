// nexus-ltm: the llama block whose attention works on segments and reads a long-term memory
// (Infini-attention's compressive memory or Titans' memory, linear or an MLP, ops/memory.h): each
// segment of memory.segment_length tokens attends to itself (causal, RoPE positions within the
// segment) and reads the memory the segments before it wrote; a learned gate per query head mixes
// the two (docs/MODELS.md). Our own architecture name, so its keys use the nexus-ltm prefix.
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
  const std::string rope = f.get_string(c->arch_name + ".memory.rope").value_or("after");
  if (rope != "before" && rope != "after")
    return Status::error(f.path() + ": " + c->arch_name + ".memory.rope is '" + rope +
                         "', expected 'before' or 'after'");
  c->memory_before_rope = rope == "before";
  // Titans' deep memory: depth 2 (an MLP of memory.hidden units), or the linear memory (depth 1).
  const int64_t depth = f.get_int(c->arch_name + ".memory.depth").value_or(1);
  if (depth != 1 && depth != 2)
    return Status::error(f.path() + ": " + c->arch_name + ".memory.depth is " +
                         std::to_string(depth) + ", expected 1 (linear) or 2 (an MLP)");
  if (depth == 2) {
    if (c->memory_kind != MemoryKind::kTitans)
      return Status::error(f.path() + ": " + c->arch_name +
                           ".memory.depth 2 needs memory.kind 'titans'");
    const int64_t hidden = f.get_int(c->arch_name + ".memory.hidden").value_or(0);
    if (hidden < 1 || hidden > (1 << 16))
      return Status::error(f.path() + ": " + c->arch_name +
                           ".memory.hidden is missing or out of range for a depth-2 memory");
    c->memory_hidden = hidden;
    for (int64_t l = 0; l < c->n_layers; ++l)
      for (const char* w : {"memory_w1", "memory_w2"}) {
        const std::string name = "blk." + std::to_string(l) + "." + w;
        const GgufTensorInfo* t = f.find_tensor(name);
        if (t != nullptr && t->dtype != DType::kF32)
          return Status::error(f.path() + ": tensor '" + name + "' must be F32, is " +
                               std::string(dtype_name(t->dtype)));
      }
  }
  // Slot reduction (nexus memory-reduce): slots per layer, each addressed through an F32
  // projection blk.N.memory_proj [kv_heads][head_dim][slots]; for the deep memory, the hidden
  // units each layer kept (blk.N.memory_w1 and memory_w2 that many wide).
  if (const std::vector<int64_t>* slots = f.get_int_array(c->arch_name + ".memory.slots")) {
    const bool deep = c->memory_hidden > 0;
    const int64_t most = deep ? c->memory_hidden : c->head_dim;
    if (static_cast<int64_t>(slots->size()) != c->n_layers)
      return Status::error(f.path() + ": " + c->arch_name + ".memory.slots has " +
                           std::to_string(slots->size()) + " entries for " +
                           std::to_string(c->n_layers) + " layers");
    for (size_t l = 0; l < slots->size(); ++l) {
      const int64_t n = (*slots)[l];
      if (n < 1 || n > most)
        return Status::error(f.path() + ": " + c->arch_name + ".memory.slots[" + std::to_string(l) +
                             "] = " + std::to_string(n) + " is outside 1.." + std::to_string(most) +
                             (deep ? " (the deep memory's hidden units)" : ""));
      if (deep) continue;
      const std::string name = "blk." + std::to_string(l) + ".memory_proj";
      const GgufTensorInfo* t = f.find_tensor(name);
      if (t != nullptr && t->dtype != DType::kF32)
        return Status::error(f.path() + ": tensor '" + name + "' must be F32, is " +
                             std::string(dtype_name(t->dtype)));
    }
    c->memory_slots = *slots;
  }
  return Status::ok();
}

std::vector<LayerSlot> ltm_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = llama_layer_slots(c);
  s.push_back({&LayerWeights::memory_gate, "blk.%d.memory_gate", {c.n_heads}, true});
  if (!c.memory_slots.empty() && c.memory_hidden == 0) {
    LayerSlot proj{&LayerWeights::memory_proj, "blk.%d.memory_proj", {}, true};
    proj.shape_at = [kv = c.n_kv_heads, d = c.head_dim, slots = c.memory_slots](int64_t l) {
      return std::vector<int64_t>{kv, d, slots[static_cast<size_t>(l)]};
    };
    s.push_back(std::move(proj));
  }
  if (c.memory_kind == MemoryKind::kTitans) {
    s.push_back({&LayerWeights::memory_eta, "blk.%d.memory_eta", {c.n_kv_heads}, true});
    s.push_back({&LayerWeights::memory_theta, "blk.%d.memory_theta", {c.n_kv_heads}, true});
    s.push_back({&LayerWeights::memory_alpha, "blk.%d.memory_alpha", {c.n_kv_heads}, true});
    if (c.memory_hidden > 0) {
      const int64_t kv = c.n_kv_heads, d = c.head_dim, h = c.memory_hidden;
      LayerSlot w1{&LayerWeights::memory_w1, "blk.%d.memory_w1", {kv, d, h}, true},
          w2{&LayerWeights::memory_w2, "blk.%d.memory_w2", {kv, h, d}, true};
      if (!c.memory_slots.empty()) {  // slot-reduced: each layer's kept hidden units
        w1.shape_at = [kv, d, units = c.memory_slots](int64_t l) {
          return std::vector<int64_t>{kv, d, units[static_cast<size_t>(l)]};
        };
        w2.shape_at = [kv, d, units = c.memory_slots](int64_t l) {
          return std::vector<int64_t>{kv, units[static_cast<size_t>(l)], d};
        };
      }
      s.push_back(std::move(w1));
      s.push_back(std::move(w2));
    }
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
  out->emplace_back("nexus-ltm.memory.rope",
                    gguf_str(std::string(c.memory_before_rope ? "before" : "after")));
  if (c.memory_hidden > 0) {
    out->emplace_back("nexus-ltm.memory.depth", gguf_u32(2));
    out->emplace_back("nexus-ltm.memory.hidden", gguf_u32(static_cast<uint32_t>(c.memory_hidden)));
  }
  if (!c.memory_slots.empty())
    out->emplace_back("nexus-ltm.memory.slots", gguf_i32_array(c.memory_slots));
}

}  // namespace

const ArchSpec& ltm_spec() {
  static const ArchSpec spec{"nexus-ltm", Arch::kLtm,        read_ltm_config,
                             ltm_slots,   llama_model_slots, write_ltm_config};
  return spec;
}

}  // namespace nexus
