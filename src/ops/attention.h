// Causal multi-head attention over the KV cache, computed tile by tile with an online softmax
// (no n x n score matrix), with grouped-query heads and an optional sliding window. Front-end of
// the kernels in backends/cpu/attention.h (AttentionParams is declared there).
#pragma once

#include <cstdint>

#include "backends/cpu/attention.h"
#include "backends/cpu/kv_cache.h"
#include "nexus/core/thread_pool.h"

namespace nexus {

using cpu::attention_reference;
using cpu::attention_scratch_floats;

// out[t] = softmax(q[t] K^T * scale) V over the cached positions of sequence seq[t] visible from
// pos[t] (which must already be stored). q and out are [n][n_heads * head_dim].
// `scratch` holds pool.size() * attention_scratch_floats(...) floats.
void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch);

}  // namespace nexus
