// CPU rotary-embedding kernels (ops/rope.h is their front-end and documents them).
#pragma once

#include <cstdint>

#include "nexus/config.h"

namespace nexus::cpu {

void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs);
void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs);

}  // namespace nexus::cpu
