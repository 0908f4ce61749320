// Plain configuration types every layer shares: a model's hyper-parameters and the kernel choices
// a context is built with. Data only: no layer's code behind them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nexus {

enum class Arch { kLlama, kQwen2, kQwen3, kGpt2, kMamba, kMamba2, kGraniteHybrid, kLtm };
enum class RopeStyle { kNone, kNormal, kNeox };  // adjacent pairs (llama) / halves (NeoX, qwen)
// nexus-ltm's long-term memory: Infini-attention's compressive memory, or Titans' memory, linear
// or a two-layer MLP (backends/api/memory.h).
enum class MemoryKind { kInfini, kTitans };

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
  // Hybrids (granitehybrid): 1 for the layers that are state-space (head_count_kv 0), 0 for the
  // attention layers.
  std::vector<uint8_t> recurrent;
  // nexus-ltm (the llama block with a long-term memory, docs/MODELS.md): tokens per segment (each
  // segment attends to itself and reads the memory of the segments before it); 0 elsewhere.
  int64_t memory_segment = 0;
  MemoryKind memory_kind = MemoryKind::kInfini;
  // nexus-ltm titans: the deep memory's hidden width (an MLP of two layers, blk.N.memory_w1 and
  // memory_w2 its learned initial weights); 0: the linear memory.
  int64_t memory_hidden = 0;
  // nexus-ltm: the memory reads and writes q and k before RoPE (content only, the same wherever
  // a token sits in its segment) rather than after it (the segment's positions rotate them).
  bool memory_before_rope = false;
  // nexus-ltm slot reduction (nexus memory-reduce, inference only): the memory's slots per layer,
  // each addressed through blk.N.memory_proj (the linear memories), or the deep memory's hidden
  // units per layer; empty: head_dim slots (memory_hidden units) everywhere.
  std::vector<int64_t> memory_slots;
  // Layer l's memory slots, 0 for the full head_dim.
  int64_t memory_slots_at(int64_t l) const {
    return memory_slots.empty() ? 0 : memory_slots[static_cast<size_t>(l)];
  }
  // Layer l's deep-memory hidden units (memory_hidden, or fewer after slot reduction); 0 for a
  // linear memory, whose slots are not hidden units.
  int64_t memory_hidden_at(int64_t l) const {
    return memory_hidden == 0 || memory_slots.empty() ? memory_hidden
                                                      : memory_slots[static_cast<size_t>(l)];
  }

  // Every layer is state-space (mamba, mamba2).
  bool ssm() const { return arch == Arch::kMamba || arch == Arch::kMamba2; }
  bool hybrid() const { return arch == Arch::kGraniteHybrid; }
  bool has_recurrent() const { return ssm() || hybrid(); }
  bool recurrent_layer(int64_t l) const {
    return ssm() || (hybrid() && recurrent[static_cast<size_t>(l)] != 0);
  }
  // The state-space mixer is Mamba-2's (multi-head, grouped B/C, gated norm).
  bool mamba2_mixer() const { return arch == Arch::kMamba2 || arch == Arch::kGraniteHybrid; }
  // Scan heads and channels per head: mamba2's multi-head form; mamba is d_inner heads of one.
  int64_t ssm_heads() const { return mamba2_mixer() ? ssm_dt_rank : ssm_inner; }
  int64_t ssm_head_dim() const { return ssm_inner / ssm_heads(); }
  int64_t ssm_n_groups() const { return mamba2_mixer() ? ssm_groups : 1; }
  // Channels through the conv: x (mamba), x with B and C (mamba2).
  int64_t ssm_conv_channels() const {
    return mamba2_mixer() ? ssm_inner + 2 * ssm_groups * ssm_state : ssm_inner;
  }
  // Layers of each kind.
  int64_t n_recurrent_layers() const {
    int64_t k = 0;
    for (int64_t l = 0; l < n_layers; ++l) k += recurrent_layer(l) ? 1 : 0;
    return k;
  }
  int64_t n_attention_layers() const { return n_layers - n_recurrent_layers(); }
};

// Attention kernel: the tiled online-softmax one, or the naive one that materialises every score
// row over f32 copies of K/V (the baseline of `nexus bench --ladder`).
enum class AttentionImpl { kFlash, kNaive };

}  // namespace nexus
