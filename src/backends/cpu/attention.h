// CPU attention kernels over the KV cache (ops/attention.h is their front-end): the tiled
// online-softmax one, the naive one that materialises every score row, and a plain reference.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/kv_cache.h"
#include "nexus/core/thread_pool.h"

namespace nexus {

struct AttentionParams {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t window = 0;  // 0 = full causal; else key j is visible from query i iff i - window < j <= i
  float scale = 1.0f;
};

// The first key position visible from a query at `pos` (0 without a window).
inline int32_t first_visible_key(int32_t pos, const AttentionParams& p) {
  return p.window > 0 ? std::max<int32_t>(0, pos - static_cast<int32_t>(p.window) + 1) : 0;
}

namespace cpu {

// Floats of per-thread scratch attention() needs.
size_t attention_scratch_floats(const AttentionParams& p, int64_t kv_row_width);

// The tiled kernel (contract of nexus::attention in ops/attention.h).
void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch);

// The same contract, but all visible K and V rows of the sequence are copied to f32 and each query
// head builds its full softmax row (O(n_ctx) floats per thread, allocated here: the slow path on
// purpose, kept exact and simple).
void attention_naive(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                     const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                     ThreadPool& pool);

// Plain reference: materialises all scores for one query row over f32 keys/values
// k[j][n_kv_heads * head_dim], v likewise, j < n_keys visible per the same window rule.
void attention_reference(const float* q, const float* k, const float* v, int32_t pos,
                         const AttentionParams& p, float* out);

}  // namespace cpu
}  // namespace nexus
