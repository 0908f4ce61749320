// Element-wise op front-ends: a profile span each, then the CPU kernel.
#include "ops/elementwise.h"

#include "ops/op_args.h"

namespace nexus {

void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim) {
  NEXUS_PROFILE_OP("rms_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
  cpu::rms_norm(x, w, eps, y, rows, dim);
}

void layer_norm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                int64_t dim) {
  NEXUS_PROFILE_OP("layer_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
  cpu::layer_norm(x, w, b, eps, y, rows, dim);
}

void swiglu(float* g, const float* u, int64_t n) {
  NEXUS_PROFILE_OP("swiglu", profile::current_layer(), 12 * n, 0, profile::rows_shapes(1, n));
  cpu::swiglu(g, u, n);
}

void gelu_tanh(float* x, int64_t n) {
  NEXUS_PROFILE_OP("gelu", profile::current_layer(), 8 * n, 0, profile::rows_shapes(1, n));
  cpu::gelu_tanh(x, n);
}

void add_bias(float* y, const float* b, int64_t rows, int64_t dim) {
  cpu::add_bias(y, b, rows, dim);
}

void add_inplace(float* y, const float* x, int64_t n) { cpu::add_inplace(y, x, n); }

bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max) {
  return cpu::copy_block_max(src, dst, n, block_max);
}

}  // namespace nexus
