// Per-ISA kernels behind the element-wise ops of ops/elementwise.h (picked by active_isa()).
#pragma once

#include <cstdint>

namespace nexus::cpu {

// g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)).
void swiglu_scalar(float* g, const float* u, int64_t n);
void swiglu_avx2(float* g, const float* u, int64_t n);

}  // namespace nexus::cpu
