// Plain configuration types every layer shares: a model's hyper-parameters and the kernel choices
// a context is built with. Data only: no layer's code behind them.
#pragma once

#include <cstdint>
#include <string>

namespace nexus {

enum class Arch { kLlama, kQwen2, kQwen3, kGpt2 };
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
};

// Attention kernel: the tiled online-softmax one, or the naive one that materialises every score
// row over f32 copies of K/V (the baseline of `nexus bench --ladder`).
enum class AttentionImpl { kFlash, kNaive };

}  // namespace nexus
