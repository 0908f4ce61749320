// Naive attention (the optimization ladder's baseline): every query row materialises its whole
// score row over f32 copies of the cached K/V, like attention_reference. Chosen per context with
// ContextOptions::attention; attention() dispatches here while a ScopedAttentionImpl says so.
#pragma once

#include <cstdint>

#include "nexus/core/thread_pool.h"
#include "nexus/config.h"
#include "ops/attention.h"
#include "backends/cpu/kv_cache.h"

namespace nexus {

// Same contract as attention(), but copies all visible K and V rows of the sequence to f32 and
// computes the full softmax row per query head (O(n_ctx) floats per thread, allocated here: this
// is the slow path on purpose, kept exact and simple).
void attention_naive(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                     const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                     ThreadPool& pool);

// The attention kernel the current thread's forward pass uses (kFlash unless a scope says so).
AttentionImpl current_attention_impl();

// Selects the attention kernel for the current thread until the end of the scope.
class ScopedAttentionImpl {
 public:
  explicit ScopedAttentionImpl(AttentionImpl impl);
  ~ScopedAttentionImpl();
  ScopedAttentionImpl(const ScopedAttentionImpl&) = delete;
  ScopedAttentionImpl& operator=(const ScopedAttentionImpl&) = delete;

 private:
  AttentionImpl saved_;
};

}  // namespace nexus
