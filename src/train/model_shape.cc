// Shape and byte-size parsing for the training commands.
#include "nexus/train/model_shape.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace nexus::train {

Status set_shape_arch(ModelConfig& cfg, const std::string& arch) {
  if (arch == "llama") return Status::ok();
  if (arch == "nexus-ltm") {
    // The llama block with a long-term memory over segments of 64 tokens (--memory-segment).
    cfg.arch = Arch::kLtm;
    cfg.arch_name = arch;
    cfg.memory_segment = 64;
    return Status::ok();
  }
  if (arch == "qwen2" || arch == "qwen3") {
    // qwen2: q/k/v biases; qwen3: per-head q/k RMSNorm; both NeoX RoPE, Qwen's base and epsilon.
    cfg.arch = arch == "qwen2" ? Arch::kQwen2 : Arch::kQwen3;
    cfg.arch_name = arch;
    cfg.rope = RopeStyle::kNeox;
    cfg.rope_theta = 1000000.0f;
    cfg.norm_eps = 1e-6f;
    return Status::ok();
  }
  if (arch == "mamba" || arch == "mamba2") {
    // The shape's heads, kv_heads and ffn are the scan's heads, B/C groups and inner width (mamba:
    // heads and groups 1); taps 4; state 16 (mamba) or 64 (mamba2); mamba's dt rank dim / 16.
    const bool m2 = arch == "mamba2";
    cfg.arch = m2 ? Arch::kMamba2 : Arch::kMamba;
    cfg.arch_name = arch;
    cfg.rope = RopeStyle::kNone;
    cfg.ssm_inner = cfg.ffn_dim;
    cfg.ssm_conv = 4;
    cfg.ssm_state = m2 ? 64 : 16;
    cfg.ssm_dt_rank = m2 ? cfg.n_heads : (cfg.dim + 15) / 16;
    cfg.ssm_groups = m2 ? cfg.n_kv_heads : 0;
    if (!m2 && (cfg.n_heads != 1 || cfg.n_kv_heads != 1))
      return Status::error("--shape for mamba: heads and kv_heads must be 1 (dim,layers,1,1,inner)");
    cfg.n_heads = cfg.n_kv_heads = cfg.head_dim = cfg.rope_dim = cfg.ffn_dim = 0;
    return Status::ok();
  }
  if (arch == "granitehybrid") {
    // Attention layers as the shape says, every 4th layer from the 4th (or the layers given by
    // --attention-layers), the others Mamba-2 with inner width 2 dim in heads of 64 (fewer when
    // narrower), one B/C group, a state of 64 and 4 conv taps; no positional encoding (Granite
    // 4.0-H's choice); a SwiGLU feed-forward of ffn on every layer.
    cfg.arch = Arch::kGraniteHybrid;
    cfg.arch_name = arch;
    cfg.rope = RopeStyle::kNone;
    cfg.ssm_inner = 2 * cfg.dim;
    cfg.ssm_dt_rank = std::max<int64_t>(1, cfg.ssm_inner / 64);
    cfg.ssm_groups = 1;
    cfg.ssm_state = 64;
    cfg.ssm_conv = 4;
    cfg.recurrent.assign(static_cast<size_t>(cfg.n_layers), 1);
    for (int64_t l = 3; l < cfg.n_layers; l += 4) cfg.recurrent[static_cast<size_t>(l)] = 0;
    return Status::ok();
  }
  if (arch != "gpt2")
    return Status::error(
        "--arch: unknown architecture '" + arch +
        "' (trainable: llama, qwen2, qwen3, gpt2, mamba, mamba2, granitehybrid, nexus-ltm)");
  cfg.arch = Arch::kGpt2;
  cfg.arch_name = "gpt2";
  cfg.rope = RopeStyle::kNone;
  return Status::ok();
}

Result<ModelConfig> parse_model_shape(const std::string& spec, const std::string& flag) {
  std::vector<int64_t> v;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return Status::error(flag + ": '" + item + "' is not an integer");
    }
  }
  if (v.size() != 5 && v.size() != 6)
    return Status::error(flag + " wants dim,layers,heads,kv_heads,ffn[,vocab], got '" + spec + "'");
  for (int64_t x : v)
    if (x <= 0) return Status::error(flag + ": every value must be > 0 ('" + spec + "')");
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.arch_name = "llama";
  c.dim = v[0];
  c.n_layers = v[1];
  c.n_heads = v[2];
  c.n_kv_heads = v[3];
  c.ffn_dim = v[4];
  c.n_vocab = v.size() == 6 ? v[5] : 0;
  if (c.dim % c.n_heads != 0) return Status::error(flag + ": dim must be a multiple of heads");
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = c.head_dim;
  c.tied_output = true;
  return c;
}

Status set_attention_layers(ModelConfig& cfg, const std::string& list) {
  if (!cfg.hybrid()) return Status::error("--attention-layers goes with --arch granitehybrid");
  std::vector<uint8_t> rec(static_cast<size_t>(cfg.n_layers), 1);
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t l = -1;
    try {
      l = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || l < 0 || l >= cfg.n_layers)
      return Status::error("--attention-layers: '" + item + "' is not a layer index in [0, " +
                           std::to_string(cfg.n_layers) + ")");
    rec[static_cast<size_t>(l)] = 0;
  }
  cfg.recurrent = std::move(rec);
  return Status::ok();
}

Result<uint64_t> parse_byte_size(const std::string& text) {
  const auto bad = Status::error("'" + text + "' is not a size (e.g. 4GiB, 512MiB, 1.5GB)");
  size_t used = 0;
  double value;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return bad;
  }
  std::string unit;
  for (size_t i = used; i < text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(text[i])))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  double mult = 0;
  const char* names[] = {"", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"};
  const double mults[] = {1, 1, 1e3, 1e6, 1e9, 1e12, 0x1p10, 0x1p20, 0x1p30, 0x1p40};
  for (size_t i = 0; i < std::size(names); ++i)
    if (unit == names[i]) mult = mults[i];
  if (mult == 0 || !(value > 0) || !std::isfinite(value) || value * mult >= 0x1p63) return bad;
  return static_cast<uint64_t>(value * mult);
}

}  // namespace nexus::train
