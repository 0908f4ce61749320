// Causal attention with saved probabilities: each variant runs its per-head (forward) or
// per-(sequence, KV head) (backward) kernel over the pool's threads; no two threads write the same
// row, and every element is summed in the same order as on one thread.
#include "backends/cpu/attention_train.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

using par::for_items;
using par::for_ranges;

constexpr int64_t kBlasAttnMinT = 32;

// The transposed keys or values of the calling thread's tiled item, kept between calls.
float* tiled_scratch(const AttnShape& s) {
  thread_local std::vector<float> buf;
  const auto need = static_cast<size_t>(attn_tiled_scratch(s.t, s.head_dim));
  if (buf.size() < need) buf.resize(need);
  return buf.data();
}

// Holds OpenBLAS at one thread for its lifetime: several heads run at once on the pool's threads.
class OneBlasThread {
 public:
  OneBlasThread() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~OneBlasThread() { openblas_set_num_threads(saved_); }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};

using ForwardHead = void (*)(float*, float*, const float*, const float*, const float*,
                             const AttnShape&, int64_t, int64_t);
using BackwardGroup = void (*)(float*, float*, float*, const float*, const float*, const float*,
                               const float*, const float*, const AttnShape&, int64_t, int64_t,
                               float*);
using TiledForwardHead = void (*)(float*, float*, const float*, const float*, const float*,
                                  const AttnShape&, int64_t, int64_t, float*);
using TiledBackwardGroup = void (*)(float*, float*, float*, const float*, const float*,
                                    const float*, const float*, const float*, const AttnShape&,
                                    int64_t, int64_t, float*, float*);

template <ForwardHead head>
void forward(const CausalAttentionArgs& a, ThreadPool* pool) {
  for_items(pool, a.s.b * a.s.n_heads, [&](int64_t item, int) {
    head(a.out, a.att, a.q, a.k, a.v, a.s, item / a.s.n_heads, item % a.s.n_heads);
  });
}

template <TiledForwardHead head>
void forward_tiled(const CausalAttentionArgs& a, ThreadPool* pool) {
  for_items(pool, a.s.b * a.s.n_heads, [&](int64_t item, int) {
    head(a.out, a.att, a.q, a.k, a.v, a.s, item / a.s.n_heads, item % a.s.n_heads,
         tiled_scratch(a.s));
  });
}

void forward_blas(const CausalAttentionArgs& a, ThreadPool* pool) {
  const OneBlasThread one;
  forward<attn_forward_head_blas>(a, pool);
}

// The per-pair and BLAS kernels add into the gradients: they start from zeros.
void clear_gradients(const CausalAttentionBackwardArgs& a, ThreadPool* pool) {
  const AttnShape& s = a.s;
  const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  for_ranges(pool, n, 16, [&](int64_t r0, int64_t r1) {
    std::fill(a.dq + r0 * qw, a.dq + r1 * qw, 0.0f);
    std::fill(a.dk + r0 * kvw, a.dk + r1 * kvw, 0.0f);
    std::fill(a.dv + r0 * kvw, a.dv + r1 * kvw, 0.0f);
  });
}

template <BackwardGroup group>
void backward(const CausalAttentionBackwardArgs& a, ThreadPool* pool) {
  clear_gradients(a, pool);
  const AttnShape& s = a.s;
  for_items(pool, s.b * s.n_kv_heads, [&](int64_t item, int thread) {
    group(a.dq, a.dk, a.dv, a.dout, a.att, a.q, a.k, a.v, s, item / s.n_kv_heads,
          item % s.n_kv_heads, a.scratch + thread * attention_backward_scratch(s.t));
  });
}

template <TiledBackwardGroup group>
void backward_tiled(const CausalAttentionBackwardArgs& a, ThreadPool* pool) {
  const AttnShape& s = a.s;
  for_items(pool, s.b * s.n_kv_heads, [&](int64_t item, int thread) {
    group(a.dq, a.dk, a.dv, a.dout, a.att, a.q, a.k, a.v, s, item / s.n_kv_heads,
          item % s.n_kv_heads, a.scratch + thread * attention_backward_scratch(s.t),
          tiled_scratch(s));
  });
}

void backward_blas(const CausalAttentionBackwardArgs& a, ThreadPool* pool) {
  const OneBlasThread one;
  backward<attn_backward_group_blas>(a, pool);
}

bool avx512() { return avx512_active(); }
bool tiles16(const AttnShape& s) { return s.window == 0 && s.head_dim % 16 == 0; }
bool tiles8(const AttnShape& s) { return s.window == 0 && s.head_dim % 8 == 0; }
bool blas(const AttnShape& s) { return s.window == 0 && s.t >= kBlasAttnMinT; }
bool pairs(const AttnShape& s) { return attn_avx2_supports(s.head_dim); }

template <bool (*fits)(const AttnShape&), class Args>
bool fits_args(const Args& a) {
  return fits(a.s);
}

const KernelVariant<CausalAttentionArgs> kForward[] = {
    {"tiled_avx512", avx512, forward_tiled<attn_forward_head_tiled_avx512>, fits_args<tiles16>},
    {"tiled_avx2", avx2_active, forward_tiled<attn_forward_head_tiled_avx2>, fits_args<tiles8>},
    {"blas", always_available, forward_blas, fits_args<blas>},
    {"avx2", avx2_active, forward<attn_forward_head_avx2>, fits_args<pairs>},
    {"scalar", always_available, forward<attn_forward_head_scalar>},
};
const KernelVariant<CausalAttentionBackwardArgs> kBackward[] = {
    {"tiled_avx512", avx512, backward_tiled<attn_backward_group_tiled_avx512>,
     fits_args<tiles16>},
    {"tiled_avx2", avx2_active, backward_tiled<attn_backward_group_tiled_avx2>,
     fits_args<tiles8>},
    {"blas", always_available, backward_blas, fits_args<blas>},
    {"avx2", avx2_active, backward<attn_backward_group_avx2>, fits_args<pairs>},
    {"scalar", always_available, backward<attn_backward_group_scalar>},
};

}  // namespace

KernelVariants<CausalAttentionArgs> causal_attention_kernels() { return kForward; }
KernelVariants<CausalAttentionBackwardArgs> causal_attention_backward_kernels() {
  return kBackward;
}

}  // namespace nexus::cpu
