// Rotary position embedding. Normal style rotates adjacent pairs (x[2i], x[2i+1]) (llama,
// llama2.c); NeoX style rotates (x[i], x[i + rope_dim/2]) (qwen2/3). Angle pos * theta^(-2i/rope_dim).
#pragma once

#include <cstdint>

#include "nexus/config.h"

namespace nexus {

// cs[t][i] = {cos, sin} of pos[t] * theta^(-2i/rope_dim), i < rope_dim/2 (computed in double).
void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs);
// Rotates the first rope_dim dims of each of n_heads heads of each of the n rows of x
// (row stride n_heads * head_dim) with the table from rope_table.
void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs);

}  // namespace nexus
