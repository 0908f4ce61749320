// Attention front-ends: the thread's choice of kernel (ScopedAttentionImpl), a profile span, then
// the CPU kernel.
#include "ops/attention.h"

#include "ops/attention_naive.h"
#include "ops/op_args.h"

namespace nexus {
namespace {

thread_local AttentionImpl g_attention_impl = AttentionImpl::kFlash;

}  // namespace

AttentionImpl current_attention_impl() { return g_attention_impl; }

ScopedAttentionImpl::ScopedAttentionImpl(AttentionImpl impl) : saved_(g_attention_impl) {
  g_attention_impl = impl;
}

ScopedAttentionImpl::~ScopedAttentionImpl() { g_attention_impl = saved_; }

void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch) {
  if (current_attention_impl() == AttentionImpl::kNaive)
    return attention_naive(q, kv, layer, seq, pos, n, p, out, pool);
  NEXUS_PROFILE_OP("attention", static_cast<int>(layer), profile::attention_bytes(kv, pos, n, p),
                   profile::attention_flops(pos, n, p), profile::attention_shapes(kv, n, p));
  cpu::attention(q, kv, layer, seq, pos, n, p, out, pool, scratch);
}

void attention_naive(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                     const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                     ThreadPool& pool) {
  NEXUS_PROFILE_OP("attention_naive", static_cast<int>(layer),
                   profile::attention_bytes(kv, pos, n, p), profile::attention_flops(pos, n, p),
                   profile::attention_shapes(kv, n, p));
  cpu::attention_naive(q, kv, layer, seq, pos, n, p, out, pool);
}

}  // namespace nexus
