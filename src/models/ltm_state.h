// nexus-ltm inference state, per sequence slot and layer: the long-term memory (each key/value
// head's M and z, backends/api/memory.h) and the keys and values of the segment being filled
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

// Floats of one key/value head's memory for the config's kind.
inline int64_t ltm_head_floats(const ModelConfig& c) {
  return c.memory_kind == MemoryKind::kTitans ? titans_floats(c.head_dim)
                                              : memory_floats(c.head_dim);
}

class LtmState {
 public:
  LtmState(int64_t layers, int n_seq, int64_t kv_heads, int64_t head_dim, int64_t segment,
           int64_t head_floats)
      : kv_width_(kv_heads * head_dim),
        memory_(kv_heads * head_floats),
        per_layer_(memory_ + 2 * segment * kv_width_),
        per_seq_(layers * per_layer_),
        data_(static_cast<size_t>(per_seq_ * n_seq), 0.0f) {}

  // [kv_heads][ltm_head_floats].
  float* memory(int64_t layer, int seq) { return at(layer, seq); }
  // [segment][kv_heads * head_dim], by position within the segment.
  float* keys(int64_t layer, int seq) { return at(layer, seq) + memory_; }
  float* values(int64_t layer, int seq) { return keys(layer, seq) + (per_layer_ - memory_) / 2; }
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
  float* at(int64_t layer, int seq) { return data_.data() + seq * per_seq_ + layer * per_layer_; }

  int64_t kv_width_, memory_, per_layer_, per_seq_;
  std::vector<float> data_;
};

}  // namespace nexus
