// Scalar online-softmax tile step (the reference the AVX2 version is tested against).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/attention_tile.h"

namespace nexus::cpu {

void attn_tile_scalar(const AttnTile& t) {
  float tile_max = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < t.cnt; ++j) {
    float d = 0.0f;
    for (int64_t e = 0; e < t.hd; ++e) d += t.q[e] * t.k[j * t.stride + e];
    t.scores[j] = d * t.scale;
    tile_max = std::max(tile_max, t.scores[j]);
  }
  const float m_new = std::max(*t.max, tile_max);
  const float corr = std::exp(*t.max - m_new);  // exp(-inf) = 0 on the first tile
  for (int64_t e = 0; e < t.hd; ++e) t.acc[e] *= corr;
  float add = 0.0f;
  for (int32_t j = 0; j < t.cnt; ++j) {
    const float w = std::exp(t.scores[j] - m_new);
    add += w;
    for (int64_t e = 0; e < t.hd; ++e) t.acc[e] += w * t.v[j * t.stride + e];
  }
  *t.sum = *t.sum * corr + add;
  *t.max = m_new;
}

float attn_row_softmax_scalar(float* s, int32_t cnt, float* max, float* sum) {
  float m = *max;
  for (int32_t j = 0; j < cnt; ++j) m = std::max(m, s[j]);
  const float corr = std::exp(*max - m);
  float add = 0.0f;
  for (int32_t j = 0; j < cnt; ++j) add += (s[j] = std::exp(s[j] - m));
  *sum = *sum * corr + add;
  *max = m;
  return corr;
}

}  // namespace nexus::cpu
