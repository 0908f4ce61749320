// Causal multi-head attention over the KV cache, computed tile by tile with an online softmax
// (no n x n score matrix), with grouped-query heads and an optional sliding window.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"
#include "runtime/kv_cache.h"

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

// Floats of per-thread scratch attention() needs.
size_t attention_scratch_floats(const AttentionParams& p, int64_t kv_row_width);

// out[t] = softmax(q[t] K^T * scale) V over the cached positions of sequence seq[t] visible from
// pos[t] (which must already be stored). q and out are [n][n_heads * head_dim].
// `scratch` holds pool.size() * attention_scratch_floats(...) floats.
void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch);

// Plain reference: materialises all scores for one query row over f32 keys/values
// k[j][n_kv_heads * head_dim], v likewise, j < n_keys visible per the same window rule.
void attention_reference(const float* q, const float* k, const float* v, int32_t pos,
                         const AttentionParams& p, float* out);

}  // namespace nexus
