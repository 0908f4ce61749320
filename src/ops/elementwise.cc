// Element-wise op front-ends of the forward pass: a profile span each, then the op (the norms and
// activations are the shared ops of ops/norm.h and ops/activation.h, training's too).
#include "ops/elementwise.h"

#include <cstring>

#include "backends/cpu/isa.h"
#include "backends/cpu/train_kernels.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "ops/op_args.h"

namespace nexus {

void rms_norm(const float* x, const float* w, float eps, float* y, int64_t rows, int64_t dim) {
  NEXUS_PROFILE_OP("rms_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
  nexus::rms_norm(RmsNormArgs{x, w, eps, y, nullptr, rows, dim});
}

void layer_norm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                int64_t dim) {
  NEXUS_PROFILE_OP("layer_norm", profile::current_layer(), profile::rows_bytes(rows, dim), 0,
                   profile::rows_shapes(rows, dim));
  nexus::layer_norm(LayerNormArgs{x, w, b, eps, y, nullptr, nullptr, rows, dim});
}

void swiglu(float* g, const float* u, int64_t n) {
  NEXUS_PROFILE_OP("swiglu", profile::current_layer(), 12 * n, 0, profile::rows_shapes(1, n));
  nexus::swiglu(SwigluArgs{g, g, u, n});
}

void gelu_tanh(float* x, int64_t n) {
  NEXUS_PROFILE_OP("gelu", profile::current_layer(), 8 * n, 0, profile::rows_shapes(1, n));
  nexus::gelu(GeluArgs{x, x, n});
}

void add_bias(float* y, const float* b, int64_t rows, int64_t dim) {
  cpu::add_bias(y, b, rows, dim);
}

void add_inplace(float* y, const float* x, int64_t n) { cpu::add_inplace(y, x, n); }

void fill_zero(float* p, int64_t n, ThreadPool* pool, bool streaming) {
  auto clear = [&](int64_t i0, int64_t i1) {
    if (streaming && cpu::avx2_active())
      cpu::zero_stream_avx2(p + i0, i1 - i0);
    else
      std::memset(p + i0, 0, static_cast<size_t>(i1 - i0) * sizeof(float));
  };
  if (pool == nullptr || pool->size() == 1 || n < (int64_t{1} << 18)) return clear(0, n);
  pool->parallel_for(n, clear, 1 << 17);
}

bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max) {
  return cpu::copy_block_max(src, dst, n, block_max);
}

}  // namespace nexus
