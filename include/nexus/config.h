// Plain configuration types every layer shares: a model's hyper-parameters and the kernel choices
// a context is built with. Data only: no layer's code behind them.
#pragma once

#include <cstdint>
#include <string>

namespace nexus {

enum class Arch { kLlama, kQwen2, kQwen3, kGpt2, kMamba, kMamba2 };
enum class RopeStyle { kNone, kNormal, kNeox };  // adjacent pairs (llama) / halves (NeoX, qwen)

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t dim = 0;          // embedding width
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;     // may differ from dim / n_heads (qwen3)
  int64_t ffn_dim = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t rope_dim = 0;     // rotated dims per head (<= head_dim)
  RopeStyle rope = RopeStyle::kNormal;
  int64_t sliding_window = 0;  // 0 = full causal attention
  bool tied_output = false;
  // Selective state-space layers (mamba, mamba2; 0 elsewhere): the causal conv's taps, the inner
  // width, the state size per channel, mamba's dt projection rank or mamba2's head count, and
  // mamba2's B/C groups.
  int64_t ssm_conv = 0;
  int64_t ssm_inner = 0;
  int64_t ssm_state = 0;
  int64_t ssm_dt_rank = 0;
  int64_t ssm_groups = 0;

  bool ssm() const { return arch == Arch::kMamba || arch == Arch::kMamba2; }
  // Scan heads and channels per head: mamba2's multi-head form; mamba is d_inner heads of one.
  int64_t ssm_heads() const { return arch == Arch::kMamba2 ? ssm_dt_rank : ssm_inner; }
  int64_t ssm_head_dim() const { return ssm_inner / ssm_heads(); }
  int64_t ssm_n_groups() const { return arch == Arch::kMamba2 ? ssm_groups : 1; }
  // Channels through the conv: x (mamba), x with B and C (mamba2).
  int64_t ssm_conv_channels() const {
    return arch == Arch::kMamba2 ? ssm_inner + 2 * ssm_groups * ssm_state : ssm_inner;
  }
};

// Attention kernel: the tiled online-softmax one, or the naive one that materialises every score
// row over f32 copies of K/V (the baseline of `nexus bench --ladder`).
enum class AttentionImpl { kFlash, kNaive };

}  // namespace nexus
