// CPU kernels of the rotary embedding: its variant table (ops/rope.h is the front-end) and the
// rows it is built from; and the cos/sin table.
#pragma once

#include <cstdint>

#include "backends/api/kernel.h"
#include "backends/api/rope.h"

namespace nexus::cpu {

KernelVariants<RopeArgs> rope_kernels();

// cs[t][i] = {cos, sin} of pos[t] * theta^(-2i/rope_dim), i < rope_dim/2 (computed in double).
void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs);

// Rotates the `half` adjacent pairs of one head's vector v by the (cos, sin) pairs cs (sin times
// `sign`: -1 for the inverse); the AVX2 version (rope_avx2.cc, no FMA contraction) gives the same
// bits.
void rope_rotate_row_scalar(float* v, const float* cs, int64_t half, float sign);
void rope_rotate_row_avx2(float* v, const float* cs, int64_t half, float sign);

}  // namespace nexus::cpu
