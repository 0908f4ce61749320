// The recurrent state of a model's state-space layers, per sequence slot: for every layer the
// conv's last k - 1 input rows and the scan's state (what a KV cache is to attention, but of a
// fixed size however long the sequence). It holds the state after the sequence's latest token
// only: going back to an earlier position takes a copy saved there (save/load).
#pragma once

#include <cstdint>
#include <memory>

namespace nexus {

struct SsmStateLayout {
  int64_t n_layers = 0;
  int n_seq = 1;
  int64_t conv_rows = 0;      // k - 1
  int64_t conv_channels = 0;
  int64_t scan_floats = 0;    // heads * head_dim * state_size
};

class SsmState {
 public:
  explicit SsmState(const SsmStateLayout& layout);
  ~SsmState();
  SsmState(const SsmState&) = delete;
  SsmState& operator=(const SsmState&) = delete;

  // [conv_rows][conv_channels], oldest row first.
  float* conv(int64_t layer, int seq) { return at(layer, seq); }
  const float* conv(int64_t layer, int seq) const { return at(layer, seq); }
  // [heads][head_dim][state_size].
  float* scan(int64_t layer, int seq) { return at(layer, seq) + conv_floats_; }
  const float* scan(int64_t layer, int seq) const { return at(layer, seq) + conv_floats_; }
  // Zeros (a sequence before its first token).
  void reset(int seq);
  // dst's state becomes a copy of src's.
  void copy(int src, int dst);
  // A sequence's whole state as seq_bytes() / 4 floats: written out, or read back in.
  void save(int seq, float* out) const;
  void load(int seq, const float* in);
  int64_t seq_floats() const { return per_seq_; }
  size_t bytes() const { return bytes_; }
  // Bytes one sequence's state takes.
  size_t seq_bytes() const { return per_seq_ * sizeof(float); }

 private:
  float* at(int64_t layer, int seq) const { return data_ + seq * per_seq_ + layer * per_layer_; }

  int64_t conv_floats_, per_layer_, per_seq_;
  int n_seq_;
  size_t bytes_;
  std::shared_ptr<void> mem_;
  float* data_;
};

}  // namespace nexus
