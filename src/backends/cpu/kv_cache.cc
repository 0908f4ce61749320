// KV cache storage and conversion to f32 for the attention kernel.
#include "backends/cpu/kv_cache.h"

#include <cstring>

#include "backends/cpu/quant.h"
#include "core/allocator.h"
#include "profile/memory.h"
#include "nexus/status.h"

namespace nexus {

KvCache::KvCache(int64_t n_layers, int n_seq, int64_t n_ctx, int64_t n_kv_heads, int64_t head_dim,
                 DType type)
    : n_layers_(n_layers),
      n_ctx_(n_ctx),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      width_(n_kv_heads * head_dim),
      n_seq_(n_seq),
      type_(type),
      len_(n_seq, 0) {
  NEXUS_CHECK(type == DType::kF32 || type == DType::kF16 || type == DType::kQ8_0,
              "[kv_cache] unsupported cache type " + std::string(dtype_name(type)));
  row_bytes_ = row_bytes(type, width_);
  deq_ = cpu::kernels(type).dequantize;
  total_bytes_ = row_bytes_ * 2 * n_layers * n_seq * n_ctx;
  mem_ = aligned_shared(total_bytes_, MemCategory::kKvCache);
  profile::track_buffer(mem_.get(), total_bytes_, MemCategory::kKvCache,
                        "kv_cache " + std::string(dtype_name(type)) + " " +
                            std::to_string(n_layers) + "x2x" + std::to_string(n_seq) + "x" +
                            std::to_string(n_ctx) + "x" + std::to_string(width_));
}

KvCache::~KvCache() { profile::untrack_buffer(mem_.get()); }

const uint8_t* KvCache::row_ptr(int kv, int64_t layer, int seq, int32_t pos) const {
  const size_t idx = ((static_cast<size_t>(layer) * 2 + kv) * n_seq_ + seq) * n_ctx_ + pos;
  return static_cast<const uint8_t*>(mem_.get()) + idx * row_bytes_;
}

void KvCache::store(int64_t layer, int seq, int32_t pos, const float* k, const float* v) {
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

void KvCache::load_k_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const {
  // Positions of one sequence slot are adjacent rows, so the tile is one contiguous run.
  deq_(row_ptr(0, layer, seq, p0), out, count * width_);
}

void KvCache::load_v_rows(int64_t layer, int seq, int32_t p0, int32_t count, float* out) const {
  deq_(row_ptr(1, layer, seq, p0), out, count * width_);
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
