// RoPE front-ends: a profile span, then the CPU kernel.
#include "ops/rope.h"

#include "backends/cpu/rope.h"
#include "ops/op_args.h"

namespace nexus {

void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs) {
  cpu::rope_table(pos, n, rope_dim, theta, cs);
}

void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs) {
  NEXUS_PROFILE_OP("rope", profile::current_layer(), profile::rows_bytes(n * n_heads, head_dim), 0,
                   profile::rows_shapes(n * n_heads, head_dim));
  cpu::rope_apply(x, n, n_heads, head_dim, rope_dim, style, cs);
}

}  // namespace nexus
