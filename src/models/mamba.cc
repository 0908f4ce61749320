// mamba (Mamba-1) and mamba2 (Mamba-2): tensor tables and metadata as llama.cpp writes and reads
// them. Every block is RMSNorm then the selective state-space mixer (models/ssm_layer.cc); A is
// stored already negated and exponentiated (-exp(A_log)), mamba2's A and D as [heads, 1] and its
// gated norm's weight as [groups, d_inner / groups].
#include "models/arch.h"

namespace nexus {
namespace {

std::vector<LayerSlot> mamba_slots(const ModelConfig& c) {
  const int64_t di = c.ssm_inner, n = c.ssm_state, r = c.ssm_dt_rank;
  return {
      {&LayerWeights::attn_norm, "blk.%d.attn_norm.weight", {c.dim}, true},
      {&LayerWeights::ssm_in, "blk.%d.ssm_in.weight", {2 * di, c.dim}, true},
      {&LayerWeights::ssm_conv1d, "blk.%d.ssm_conv1d.weight", {di, c.ssm_conv}, true},
      {&LayerWeights::ssm_conv1d_b, "blk.%d.ssm_conv1d.bias", {di}, true},
      {&LayerWeights::ssm_x, "blk.%d.ssm_x.weight", {r + 2 * n, di}, true},
      {&LayerWeights::ssm_dt, "blk.%d.ssm_dt.weight", {di, r}, true},
      {&LayerWeights::ssm_dt_b, "blk.%d.ssm_dt.bias", {di}, true},
      {&LayerWeights::ssm_a, "blk.%d.ssm_a", {di, n}, true},
      {&LayerWeights::ssm_d, "blk.%d.ssm_d", {di}, true},
      {&LayerWeights::ssm_out, "blk.%d.ssm_out.weight", {c.dim, di}, true},
  };
}

std::vector<LayerSlot> mamba2_slots(const ModelConfig& c) {
  std::vector<LayerSlot> s = {{&LayerWeights::attn_norm, "blk.%d.attn_norm.weight", {c.dim}, true}};
  for (LayerSlot& m : mamba2_mixer_slots(c)) s.push_back(std::move(m));
  return s;
}

Status read_ssm_config(const GgufFile& f, ModelConfig* c) {
  NEXUS_RETURN_IF_ERROR(read_ssm_keys(f, c));
  c->norm_eps = static_cast<float>(
      f.get_float(c->arch_name + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  return Status::ok();
}

void write_ssm_config(const ModelConfig& c, Metadata* out) {
  write_ssm_keys(c, out);
  out->emplace_back(std::string(arch_spec(c.arch).name) + ".attention.layer_norm_rms_epsilon",
                    gguf_f32(c.norm_eps));
}

}  // namespace

std::vector<LayerSlot> mamba2_mixer_slots(const ModelConfig& c) {
  const int64_t di = c.ssm_inner, h = c.ssm_dt_rank, g = c.ssm_groups;
  const int64_t conv = c.ssm_conv_channels();
  return {
      {&LayerWeights::ssm_in, "blk.%d.ssm_in.weight", {di + conv + h, c.dim}, true},
      {&LayerWeights::ssm_conv1d, "blk.%d.ssm_conv1d.weight", {conv, c.ssm_conv}, true},
      {&LayerWeights::ssm_conv1d_b, "blk.%d.ssm_conv1d.bias", {conv}, true},
      {&LayerWeights::ssm_dt_b, "blk.%d.ssm_dt.bias", {h}, true},
      {&LayerWeights::ssm_a, "blk.%d.ssm_a", {h, 1}, true},
      {&LayerWeights::ssm_d, "blk.%d.ssm_d", {h, 1}, true},
      {&LayerWeights::ssm_norm, "blk.%d.ssm_norm.weight", {g, di / g}, true},
      {&LayerWeights::ssm_out, "blk.%d.ssm_out.weight", {c.dim, di}, true},
  };
}

Status read_ssm_keys(const GgufFile& f, ModelConfig* c) {
  const std::string a = c->arch_name + ".";
  const std::string& p = f.path();
  auto need = [&](const char* key, int64_t* out) -> Status {
    auto v = f.get_int(a + key);
    if (!v) return Status::error(p + ": missing hyper-parameter " + a + key);
    if (*v <= 0 || *v > (1ll << 24))
      return Status::error(p + ": hyper-parameter " + a + key + " = " + std::to_string(*v) +
                           " is out of range");
    *out = *v;
    return Status::ok();
  };
  NEXUS_RETURN_IF_ERROR(need("ssm.conv_kernel", &c->ssm_conv));
  NEXUS_RETURN_IF_ERROR(need("ssm.inner_size", &c->ssm_inner));
  NEXUS_RETURN_IF_ERROR(need("ssm.state_size", &c->ssm_state));
  NEXUS_RETURN_IF_ERROR(need("ssm.time_step_rank", &c->ssm_dt_rank));
  if (c->mamba2_mixer()) {
    NEXUS_RETURN_IF_ERROR(need("ssm.group_count", &c->ssm_groups));
    if (c->ssm_inner % c->ssm_dt_rank != 0 || c->ssm_dt_rank % c->ssm_groups != 0)
      return Status::error(p + ": mamba2 needs inner_size (" + std::to_string(c->ssm_inner) +
                           ") divisible by the head count time_step_rank (" +
                           std::to_string(c->ssm_dt_rank) + ") and that by group_count (" +
                           std::to_string(c->ssm_groups) + ")");
  }
  if (f.get_int(a + "ssm.dt_b_c_rms").value_or(0) != 0)
    return Status::error(p + ": ssm.dt_b_c_rms (Falcon-Mamba's norms of dt, B and C) is not "
                             "supported");
  return Status::ok();
}

void write_ssm_keys(const ModelConfig& c, Metadata* out) {
  const std::string a = std::string(arch_spec(c.arch).name) + ".";
  auto u32 = [&](const char* key, int64_t v) {
    out->emplace_back(a + key, gguf_u32(static_cast<uint32_t>(v)));
  };
  u32("ssm.conv_kernel", c.ssm_conv);
  u32("ssm.inner_size", c.ssm_inner);
  u32("ssm.state_size", c.ssm_state);
  u32("ssm.time_step_rank", c.ssm_dt_rank);
  if (c.mamba2_mixer()) u32("ssm.group_count", c.ssm_groups);
}

const ArchSpec& mamba_spec() {
  static const ArchSpec spec{"mamba",           Arch::kMamba,      read_ssm_config, mamba_slots,
                             llama_model_slots, write_ssm_config,  /*recurrent=*/true};
  return spec;
}

const ArchSpec& mamba2_spec() {
  static const ArchSpec spec{"mamba2",          Arch::kMamba2,     read_ssm_config, mamba2_slots,
                             llama_model_slots, write_ssm_config,  /*recurrent=*/true};
  return spec;
}

}  // namespace nexus
