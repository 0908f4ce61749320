// RoPE front-ends: argument checks, a profile span for the forward pass, then the kernel.
#include "ops/rope.h"

#include <string>

#include "ops/op_args.h"

namespace nexus {

void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs) {
  cpu::rope_table(pos, n, rope_dim, theta, cs);
}

void rope(const RopeArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.rows >= 0 && a.n_heads >= 1 && a.rope_dim >= 0 && a.rope_dim % 2 == 0 &&
                  a.rope_dim <= a.head_dim && (a.rows == 0 || a.cs_rows >= 1),
              "[rope] bad shape: rows " + std::to_string(a.rows) + ", heads " +
                  std::to_string(a.n_heads) + " x " + std::to_string(a.head_dim) +
                  ", rope_dim " + std::to_string(a.rope_dim) + ", table rows " +
                  std::to_string(a.cs_rows));
  run_op(a, pool, device);
}

void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs) {
  NEXUS_PROFILE_OP("rope", profile::current_layer(), profile::rows_bytes(n * n_heads, head_dim), 0,
                   profile::rows_shapes(n * n_heads, head_dim));
  rope(RopeArgs{x, n, n_heads, head_dim, rope_dim, style, cs, n, false});
}

}  // namespace nexus
