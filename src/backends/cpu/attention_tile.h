// One online-softmax step of flash-style attention: one query head against one tile of keys and
// values (rows `stride` floats apart), updating the running max, sum and output accumulator.
// Scalar and AVX2 versions; attention() picks one per call by active_isa().
#pragma once

#include <cstdint>

namespace nexus::cpu {

struct AttnTile {
  const float* q;  // [hd]
  const float* k;  // [cnt][stride], head at offset 0
  const float* v;
  int64_t stride;
  int32_t cnt;
  int64_t hd;
  float scale;
  float* scores;  // [cnt] scratch
  float* acc;     // [hd] running sum of weights * values
  float* max;     // running max score
  float* sum;     // running sum of weights
};

void attn_tile_scalar(const AttnTile& t);
void attn_tile_avx2(const AttnTile& t);

}  // namespace nexus::cpu
