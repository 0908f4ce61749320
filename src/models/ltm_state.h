// nexus-ltm inference state, per sequence slot and layer: the long-term memory (each key/value
// head's memory, backends/api/memory.h) and the keys and values of the segment being filled
// (f32, as training computes them), which are written into the memory once the segment is
// complete. Its size does not depend on the context length; neither does the KV cache, which
// holds one segment.
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
      : kv_width_(c.n_kv_heads * c.head_dim), segment_floats_(c.memory_segment * kv_width_) {
    for (int64_t l = 0; l < c.n_layers; ++l) {
      layer_.push_back(per_seq_);
      memory_.push_back(c.n_kv_heads * ltm_head_floats(c, l));
      per_seq_ += memory_.back() + 2 * segment_floats_;
    }
    data_.assign(static_cast<size_t>(per_seq_ * n_seq), 0.0f);
  }

  // [kv_heads][ltm_head_floats(layer)].
  float* memory(int64_t layer, int seq) { return at(layer, seq); }
  int64_t memory_floats(int64_t layer) const { return memory_[static_cast<size_t>(layer)]; }
  // [segment][kv_heads * head_dim], by position within the segment.
  float* keys(int64_t layer, int seq) { return at(layer, seq) + memory_floats(layer); }
  float* values(int64_t layer, int seq) { return keys(layer, seq) + segment_floats_; }
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

  int64_t kv_width_, segment_floats_, per_seq_ = 0;
  std::vector<int64_t> layer_, memory_;  // per layer: offset in a sequence's state, memory floats
  std::vector<float> data_;
};

}  // namespace nexus
