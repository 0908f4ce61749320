// The paged KV cache: the block pool, per-sequence block tables, sharing with copy on write, and
// the conversion of cached rows to f32 for the attention kernels, one contiguous run at a time.
#include "backends/cpu/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "backends/cpu/quant.h"
#include "nexus/core/allocator.h"
#include "profile/memory.h"

namespace nexus {
namespace {

KvCacheLayout layout_of(int64_t n_layers, int n_seq, int64_t n_ctx, int64_t n_kv_heads,
                        int64_t head_dim, DType type) {
  KvCacheLayout l;
  l.n_layers = n_layers;
  l.n_seq = n_seq;
  l.n_ctx = n_ctx;
  l.n_kv_heads = n_kv_heads;
  l.head_dim = head_dim;
  l.type = type;
  return l;
}

}  // namespace

KvCache::KvCache(int64_t n_layers, int n_seq, int64_t n_ctx, int64_t n_kv_heads, int64_t head_dim,
                 DType type)
    : KvCache(layout_of(n_layers, n_seq, n_ctx, n_kv_heads, head_dim, type)) {}

KvCache::KvCache(const KvCacheLayout& l)
    : n_layers_(l.n_layers),
      n_ctx_(l.n_ctx),
      n_kv_heads_(l.n_kv_heads),
      head_dim_(l.head_dim),
      width_(l.n_kv_heads * l.head_dim),
      n_seq_(l.n_seq),
      type_(l.type),
      len_(l.n_seq, 0),
      tables_(l.n_seq),
      runs_(l.n_seq) {
  NEXUS_CHECK(type_ == DType::kF32 || type_ == DType::kF16 || type_ == DType::kQ8_0,
              "[kv_cache] unsupported cache type " + std::string(dtype_name(type_)));
  // A width of 0 (a model without attention) keeps the positions and blocks but no rows.
  NEXUS_CHECK(n_seq_ >= 1 && n_ctx_ >= 1 && n_layers_ >= 1 && width_ >= 0,
              "[kv_cache] needs at least one layer, sequence and position");
  NEXUS_CHECK(l.block_size >= 0 && l.n_blocks >= 0, "[kv_cache] negative block size or count");
  block_ = l.block_size > 0 ? std::min(l.block_size, n_ctx_) : n_ctx_;
  const int64_t per_seq = (n_ctx_ + block_ - 1) / block_;
  n_blocks_ = l.n_blocks > 0 ? l.n_blocks : per_seq * n_seq_;
  row_bytes_ = row_bytes(type_, width_);
  deq_ = cpu::kernels(type_).dequantize;
  total_bytes_ = row_bytes_ * 2 * n_layers_ * n_blocks_ * block_;
  mem_ = aligned_shared(std::max<size_t>(total_bytes_, 64), MemCategory::kKvCache);
  refs_.assign(n_blocks_, 0);
  free_.resize(n_blocks_);
  for (int64_t b = 0; b < n_blocks_; ++b) free_[b] = static_cast<int32_t>(n_blocks_ - 1 - b);
  profile::track_buffer(mem_.get(), total_bytes_, MemCategory::kKvCache,
                        "kv_cache " + std::string(dtype_name(type_)) + " " +
                            std::to_string(n_layers_) + "x2x" + std::to_string(n_blocks_) +
                            " blocks x" + std::to_string(block_) + "x" + std::to_string(width_));
}

KvCache::~KvCache() { profile::untrack_buffer(mem_.get()); }

std::string KvCache::describe_pool() const {
  return std::to_string(n_blocks_ - free_blocks()) + " of " + std::to_string(n_blocks_) +
         " blocks of " + std::to_string(block_) + " positions in use";
}

int32_t KvCache::take_block() {
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  return b;
}

void KvCache::release_block(int32_t b) {
  if (--refs_[b] > 0) return;
  // Keep the free list sorted high to low so the lowest block is taken next: a sequence that grows
  // alone gets consecutive blocks, one contiguous run.
  free_.insert(std::upper_bound(free_.begin(), free_.end(), b, std::greater<int32_t>()), b);
}

void KvCache::copy_block(int32_t from, int32_t to, int64_t positions) {
  for (int64_t layer = 0; layer < n_layers_; ++layer)
    for (int kv = 0; kv < 2; ++kv) {
      const size_t base = (static_cast<size_t>(layer) * 2 + kv) * n_blocks_;
      uint8_t* mem = static_cast<uint8_t*>(mem_.get());
      std::memcpy(mem + (base + to) * block_ * row_bytes_,
                  mem + (base + from) * block_ * row_bytes_,
                  static_cast<size_t>(positions) * row_bytes_);
    }
}

void KvCache::update_runs(int seq) {
  const std::vector<int32_t>& t = tables_[seq];
  std::vector<int32_t>& r = runs_[seq];
  r.assign(t.size(), 1);
  for (size_t i = t.size(); i-- > 1;)
    if (t[i] == t[i - 1] + 1) r[i - 1] = r[i] + 1;
}

Status KvCache::reserve(int seq, int32_t n_pos) {
  NEXUS_CHECK(seq >= 0 && seq < n_seq_, "[kv_cache] sequence " + std::to_string(seq) +
                                            " out of range [0, " + std::to_string(n_seq_) + ")");
  if (n_pos > n_ctx_)
    return Status::error("KV cache: sequence " + std::to_string(seq) + " needs " +
                         std::to_string(n_pos) + " positions, more than the context size " +
                         std::to_string(n_ctx_));
  std::vector<int32_t>& t = tables_[seq];
  const int64_t need = (n_pos + block_ - 1) / block_;
  // The block the next write lands in, when another sequence shares it, is copied first.
  const int64_t first_write = len_[seq] / block_;
  const bool cow = first_write < static_cast<int64_t>(t.size()) && first_write < need &&
                   refs_[t[first_write]] > 1;
  const int64_t missing = std::max<int64_t>(0, need - static_cast<int64_t>(t.size())) + cow;
  if (missing == 0) return Status::ok();
  if (missing > free_blocks())
    return Status::error("KV cache full: sequence " + std::to_string(seq) + " needs " +
                         std::to_string(missing) + " more block(s) for " + std::to_string(n_pos) +
                         " positions; " + describe_pool());
  if (cow) {
    const int32_t fresh = take_block();
    copy_block(t[first_write], fresh, block_);
    release_block(t[first_write]);
    t[first_write] = fresh;
  }
  while (static_cast<int64_t>(t.size()) < need) t.push_back(take_block());
  update_runs(seq);
  return Status::ok();
}

void KvCache::clear(int seq, int32_t from_pos) {
  if (seq < 0 || seq >= n_seq_) return;
  from_pos = std::max<int32_t>(0, from_pos);
  len_[seq] = std::min(len_[seq], from_pos);
  std::vector<int32_t>& t = tables_[seq];
  const size_t keep = static_cast<size_t>((from_pos + block_ - 1) / block_);
  while (t.size() > keep) {
    release_block(t.back());
    t.pop_back();
  }
  update_runs(seq);
}

Status KvCache::share_prefix(int src, int dst, int32_t n_pos) {
  NEXUS_CHECK(src >= 0 && src < n_seq_ && dst >= 0 && dst < n_seq_ && src != dst,
              "[kv_cache] share_prefix needs two different sequences in [0, " +
                  std::to_string(n_seq_) + ")");
  if (len_[dst] != 0 || !tables_[dst].empty())
    return Status::error("KV cache: sequence " + std::to_string(dst) +
                         " must be empty to take a prefix");
  if (n_pos > len_[src])
    return Status::error("KV cache: sequence " + std::to_string(src) + " holds " +
                         std::to_string(len_[src]) + " positions, not " + std::to_string(n_pos));
  const int64_t full = n_pos / block_;
  const bool partial = n_pos % block_ != 0;
  if (partial && free_blocks() < 1)
    return Status::error("KV cache full: no block to copy the prefix's last " +
                         std::to_string(n_pos % block_) + " positions into; " + describe_pool());
  std::vector<int32_t>& t = tables_[dst];
  for (int64_t i = 0; i < full; ++i) {
    t.push_back(tables_[src][i]);
    ++refs_[tables_[src][i]];
  }
  if (partial) {
    const int32_t fresh = take_block();
    copy_block(tables_[src][full], fresh, n_pos % block_);
    t.push_back(fresh);
  }
  len_[dst] = n_pos;
  update_runs(dst);
  return Status::ok();
}

void KvCache::set_len(int seq, int32_t n) {
  NEXUS_CHECK(n >= 0 && n <= static_cast<int64_t>(tables_[seq].size()) * block_,
              "[kv_cache] sequence " + std::to_string(seq) + ": length " + std::to_string(n) +
                  " is past its reserved positions");
  len_[seq] = n;
}

void KvCache::store(int64_t layer, int seq, int32_t pos, const float* k, const float* v) {
  const int64_t b = pos / block_;
  NEXUS_CHECK(b < static_cast<int64_t>(tables_[seq].size()) && refs_[tables_[seq][b]] == 1,
              "[kv_cache] sequence " + std::to_string(seq) + ", position " + std::to_string(pos) +
                  ": not reserved, or in a shared block (reserve first)");
  cpu::quantize_row(type_, k, const_cast<uint8_t*>(row_ptr(0, layer, seq, pos)), width_);
  cpu::quantize_row(type_, v, const_cast<uint8_t*>(row_ptr(1, layer, seq, pos)), width_);
}

void KvCache::load(int kv, int64_t layer, int seq, int32_t p0, int32_t count, int64_t head,
                   float* out, float* tmp) const {
  const int64_t bs = traits(type_).block_size;
  const bool aligned = head_dim_ % bs == 0;
  const size_t head_off = row_bytes(type_, aligned ? head * head_dim_ : 0);
  for (int32_t i = 0; i < count; ++i) {
    const uint8_t* row = row_ptr(kv, layer, seq, p0 + i);
    if (aligned) {
      deq_(row + head_off, out + i * head_dim_, head_dim_);
    } else {
      deq_(row, tmp, width_);
      std::memcpy(out + i * head_dim_, tmp + head * head_dim_, head_dim_ * sizeof(float));
    }
  }
}

void KvCache::load_rows(int kv, int64_t layer, int seq, int32_t p0, int32_t count,
                        float* out) const {
  // One conversion call per contiguous run of the tile (the whole tile when it lies in one).
  while (count > 0) {
    const int32_t n = std::min(count, run_end(seq, p0) - p0);
    deq_(row_ptr(kv, layer, seq, p0), out, n * width_);
    out += n * width_;
    p0 += n;
    count -= n;
  }
}

void KvCache::load_k_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const {
  load_rows(0, layer, seq, p0, count, out);
}

void KvCache::load_v_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const {
  load_rows(1, layer, seq, p0, count, out);
}

void KvCache::load_k(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
                     float* tmp) const {
  load(0, layer, seq, p0, count, head, out, tmp);
}

void KvCache::load_v(int64_t layer, int seq, int32_t p0, int32_t count, int64_t head, float* out,
                     float* tmp) const {
  load(1, layer, seq, p0, count, head, out, tmp);
}

}  // namespace nexus
