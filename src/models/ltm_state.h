// nexus-ltm inference state, per sequence slot and layer: the long-term memory (each key/value
// head's memory, backends/api/memory.h), and for a memory that reads q and k before RoPE the
// segment's unrotated keys (f32). Once a segment is complete it is written into the memory from
// the KV cache, which holds the segment: its values, and its keys when the memory reads them
// rotated. Its size does not depend on the context length; neither does the cache's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/api/memory.h"
#include "nexus/config.h"

namespace nexus {

// Floats of one key/value head's memory at layer l for the config's kind (and slots).
inline int64_t ltm_head_floats(const ModelConfig& c, int64_t l) {
  const int64_t slots = c.memory_slots_at(l);
  if (c.memory_hidden > 0) return titans_mlp_floats(c.head_dim, c.memory_hidden_at(l));
  return c.memory_kind == MemoryKind::kTitans ? titans_floats(c.head_dim, slots)
                                              : memory_floats(c.head_dim, slots);
}

class LtmState {
 public:
  explicit LtmState(const ModelConfig& c, int n_seq)
      : kv_width_(c.n_kv_heads * c.head_dim),
        key_floats_(c.memory_before_rope ? c.memory_segment * kv_width_ : 0) {
    for (int64_t l = 0; l < c.n_layers; ++l) {
      layer_.push_back(per_seq_);
      memory_.push_back(c.n_kv_heads * ltm_head_floats(c, l));
      per_seq_ += memory_.back() + key_floats_;
    }
    data_.assign(static_cast<size_t>(per_seq_ * n_seq), 0.0f);
  }

  // [kv_heads][ltm_head_floats(layer)].
  float* memory(int64_t layer, int seq) { return at(layer, seq); }
  int64_t memory_floats(int64_t layer) const { return memory_[static_cast<size_t>(layer)]; }
  // The unrotated keys, [segment][kv_heads * head_dim] by position within the segment; null when
  // the memory reads rotated keys (the cache's).
  float* keys(int64_t layer, int seq) {
    return key_floats_ ? at(layer, seq) + memory_floats(layer) : nullptr;
  }
  void reset(int seq) {
    std::fill(data_.begin() + seq * per_seq_, data_.begin() + (seq + 1) * per_seq_, 0.0f);
  }
  void copy(int src, int dst) {
    std::copy_n(data_.begin() + src * per_seq_, per_seq_, data_.begin() + dst * per_seq_);
  }
  // A sequence's whole state as seq_floats() floats: written out, or read back in.
  void save(int seq, float* out) const {
    std::copy_n(data_.begin() + seq * per_seq_, per_seq_, out);
  }
  void load(int seq, const float* in) { std::copy_n(in, per_seq_, data_.begin() + seq * per_seq_); }
  int64_t seq_floats() const { return per_seq_; }
  size_t bytes() const { return data_.size() * sizeof(float); }
  int64_t kv_width() const { return kv_width_; }

 private:
  float* at(int64_t layer, int seq) {
    return data_.data() + seq * per_seq_ + layer_[static_cast<size_t>(layer)];
  }

  int64_t kv_width_, key_floats_, per_seq_ = 0;
  std::vector<int64_t> layer_, memory_;  // per layer: offset in a sequence's state, memory floats
  std::vector<float> data_;
};

}  // namespace nexus
