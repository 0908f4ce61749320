// Key/value cache: for every layer and sequence slot, n_ctx rows of n_kv_heads * head_dim values
// stored as F32, F16 or Q8_0 (one counted allocation). Rows are written once per token and read
// back tile by tile, converted to f32, by the attention kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nexus/dtype.h"

namespace nexus {

class KvCache {
 public:
  KvCache(int64_t n_layers, int n_seq, int64_t n_ctx, int64_t n_kv_heads, int64_t head_dim,
          DType type);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  DType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int64_t row_width() const { return width_; }
  size_t bytes() const { return total_bytes_; }

  // Writes one token's keys and values (row_width() floats each) at `pos` of sequence `seq`.
  void store(int64_t layer, int seq, int32_t pos, const float* k, const float* v);
  // Converts rows [p0, p0 + count) of head `head` to f32: out[count][head_dim]. `tmp` must hold
  // row_width() floats (used when a head is not block-aligned in a quantized row).
  void load_k(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
              float* tmp) const;
  void load_v(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
              float* tmp) const;

  // Converts whole rows [p0, p0 + count) (all heads) to f32 in one call: out[count][row_width()].
  // Cheaper than per-head loads when heads are narrow.
  void load_k_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const;
  void load_v_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const;

  // Raw rows for kernels that read the cache type directly: the row of position `pos` (the
  // positions of one sequence are consecutive rows, row_stride() bytes apart).
  const uint8_t* k_row(int64_t layer, int seq, int32_t pos) const {
    return row_ptr(0, layer, seq, pos);
  }
  const uint8_t* v_row(int64_t layer, int seq, int32_t pos) const {
    return row_ptr(1, layer, seq, pos);
  }
  size_t row_stride() const { return row_bytes_; }

  int32_t len(int seq) const { return len_[seq]; }
  void set_len(int seq, int32_t n) { len_[seq] = n; }

 private:
  const uint8_t* row_ptr(int kv, int64_t layer, int seq, int32_t pos) const;
  void load(int kv, int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
            float* tmp) const;

  void (*deq_)(const void*, float*, int64_t);  // the cache type's dequantizer, looked up once
  int64_t n_layers_, n_ctx_, n_kv_heads_, head_dim_, width_;
  int n_seq_;
  DType type_;
  size_t row_bytes_;
  size_t total_bytes_;
  std::shared_ptr<void> mem_;
  std::vector<int32_t> len_;
};

}  // namespace nexus
