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

// Online-softmax update of one row of `cnt` scaled scores (cnt >= 1): the running max becomes
// m = max(*max, max(s)), s[j] is replaced by exp(s[j] - m), *sum becomes *sum * corr + sum(s),
// and corr = exp(old max - m) is returned (the factor the row's accumulator must be scaled by).
using AttnRowSoftmaxFn = float (*)(float* s, int32_t cnt, float* max, float* sum);
float attn_row_softmax_scalar(float* s, int32_t cnt, float* max, float* sum);
float attn_row_softmax_avx2(float* s, int32_t cnt, float* max, float* sum);

}  // namespace nexus::cpu
