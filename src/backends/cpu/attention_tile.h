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

// The same step for the `group` query heads that share one KV head, reading that head's keys and
// values straight from the cache rows (F32 or F16 values, `row_bytes` apart) instead of an f32
// copy of the tile: each key/value row is converted once for the whole group, four keys' scores
// come out of one combined horizontal sum, and the value sums keep 32 outputs in registers.
// Requires hd % 8 == 0. Matches attn_tile_avx2 on the converted rows to f32 rounding.
struct AttnTileKv {
  const float* q;        // [group][hd]
  const uint8_t* k;      // the tile's first key row, at this KV head's offset
  const uint8_t* v;      // the tile's first value row, at this KV head's offset
  size_t row_bytes;      // bytes from one position's row to the next
  int32_t cnt;           // keys in the tile, 1..scores' capacity per head
  int64_t hd;
  int group;
  float scale;
  float* scores;         // [group][score_stride] scratch
  int64_t score_stride;  // >= cnt
  float* acc;            // [group][hd] running sums of weights * values
  float* max;            // [group] running max scores
  float* sum;            // [group] running sums of weights
};
void attn_tile_kv_f32_avx2(const AttnTileKv& t);
void attn_tile_kv_f16_avx2(const AttnTileKv& t);

// Online-softmax update of one row of `cnt` scaled scores (cnt >= 1): the running max becomes
// m = max(*max, max(s)), s[j] is replaced by exp(s[j] - m), *sum becomes *sum * corr + sum(s),
// and corr = exp(old max - m) is returned (the factor the row's accumulator must be scaled by).
using AttnRowSoftmaxFn = float (*)(float* s, int32_t cnt, float* max, float* sum);
float attn_row_softmax_scalar(float* s, int32_t cnt, float* max, float* sum);
float attn_row_softmax_avx2(float* s, int32_t cnt, float* max, float* sum);

}  // namespace nexus::cpu
