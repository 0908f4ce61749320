// Key/value cache in fixed-size blocks from one pool (paged, as vLLM's): every sequence slot has a
// block table, blocks are taken from the pool as a sequence grows (reserve) and given back when it
// shrinks (clear), and full blocks can be shared between sequences (share_prefix: a common prompt
// stored once), copied on write. A block holds block_size() positions of K and V rows
// (n_kv_heads * head_dim values as F32, F16 or Q8_0) for every layer; one counted allocation.
// Attention reads through the table: a sequence's positions are contiguous within a run of
// consecutive blocks (run_end), which is the whole sequence when it grew alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {

struct KvCacheLayout {
  int64_t n_layers = 0;
  int n_seq = 1;      // sequence slots
  int64_t n_ctx = 0;  // most positions one sequence holds
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  DType type = DType::kF16;
  // Positions per block (at most n_ctx): 0 = n_ctx, one block per sequence, the contiguous cache
  // of a single-user run; a server takes small blocks to share prefixes and fill memory evenly.
  int64_t block_size = 0;
  // Blocks in the pool: 0 = enough for every slot to hold n_ctx positions.
  int64_t n_blocks = 0;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheLayout& layout);
  // A pool sized for n_seq full contexts, one block per sequence.
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
  int64_t block_size() const { return block_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }

  // --- blocks (the server's paged cache) ---

  // Makes positions [0, n_pos) of `seq` writable: takes blocks from the pool for the ones it lacks
  // and copies a shared block it will write into (copy on write). An error when the pool has too
  // few free blocks (nothing is taken then) or n_pos exceeds n_ctx.
  Status reserve(int seq, int32_t n_pos);
  // Forgets positions >= from_pos of `seq` and gives back the blocks no position uses any more.
  void clear(int seq, int32_t from_pos = 0);
  // `dst` (which must be empty) takes the first n_pos positions of `src`: their full blocks are
  // shared (stored once), a last partial block is copied. An error when no block is free for it.
  Status share_prefix(int src, int dst, int32_t n_pos);
  // The physical blocks of `seq`, in position order.
  std::span<const int32_t> block_table(int seq) const { return tables_[seq]; }
  // Sequences using a block (0 when free).
  int block_refs(int32_t block) const { return refs_[block]; }

  // --- rows (attention kernels) ---

  // Writes one token's keys and values (row_width() floats each) at `pos` of sequence `seq`; the
  // position must be reserved and its block not shared (throws nexus::Error otherwise).
  void store(int64_t layer, int seq, int32_t pos, const float* k, const float* v);
  // Converts rows [p0, p0 + count) of head `head` to f32: out[count][head_dim]. `tmp` must hold
  // row_width() floats (used when a head is not block-aligned in a quantized row).
  void load_k(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
              float* tmp) const;
  void load_v(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
              float* tmp) const;
  // Converts whole rows [p0, p0 + count) (all heads) to f32 in one call per run:
  // out[count][row_width()]. Cheaper than per-head loads when heads are narrow.
  void load_k_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const;
  void load_v_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const;

  // Raw rows for kernels that read the cache type directly: the row of position `pos`. Rows of
  // positions [pos, run_end(seq, pos)) follow each other row_stride() bytes apart.
  const uint8_t* k_row(int64_t layer, int seq, int32_t pos) const {
    return row_ptr(0, layer, seq, pos);
  }
  const uint8_t* v_row(int64_t layer, int seq, int32_t pos) const {
    return row_ptr(1, layer, seq, pos);
  }
  size_t row_stride() const { return row_bytes_; }
  // The first position after `pos` whose row is not contiguous with pos's (the end of its run of
  // physically consecutive blocks, at most the reserved end).
  int32_t run_end(int seq, int32_t pos) const {
    const int64_t b = pos / block_;
    return static_cast<int32_t>((b + runs_[seq][b]) * block_);
  }

  int32_t len(int seq) const { return len_[seq]; }
  // Positions [0, n) of `seq` hold data (n must be reserved); shrinking does not free blocks
  // (clear does).
  void set_len(int seq, int32_t n);

 private:
  const uint8_t* row_ptr(int kv, int64_t layer, int seq, int32_t pos) const {
    const int64_t b = tables_[seq][pos / block_];
    const size_t idx = ((static_cast<size_t>(layer) * 2 + kv) * n_blocks_ + b) * block_ +
                       static_cast<size_t>(pos % block_);
    return static_cast<const uint8_t*>(mem_.get()) + idx * row_bytes_;
  }
  void load(int kv, int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
            float* tmp) const;
  void load_rows(int kv, int64_t layer, int seq, int32_t p0, int32_t count, float* out) const;
  int32_t take_block();
  void release_block(int32_t b);
  void copy_block(int32_t from, int32_t to, int64_t positions);
  void update_runs(int seq);
  std::string describe_pool() const;

  void (*deq_)(const void*, float*, int64_t);  // the cache type's dequantizer, looked up once
  int64_t n_layers_, n_ctx_, n_kv_heads_, head_dim_, width_;
  int n_seq_;
  DType type_;
  int64_t block_, n_blocks_;
  size_t row_bytes_;
  size_t total_bytes_;
  std::shared_ptr<void> mem_;
  std::vector<int32_t> len_;
  std::vector<std::vector<int32_t>> tables_;  // per sequence: physical block of each block index
  // per sequence and block index: how many blocks from it on are physically consecutive
  std::vector<std::vector<int32_t>> runs_;
  std::vector<int32_t> refs_;  // per physical block
  std::vector<int32_t> free_;  // free blocks, the lowest last (taken first)
};

}  // namespace nexus
