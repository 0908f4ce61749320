// Naive causal attention over the KV cache: per (token, KV head) the visible K and V rows are
// converted to f32 in full, then each query head of the group builds its whole score row, takes
// a plain softmax and the weighted sum of V. Memory grows with the sequence (the flash kernel's
// does not); kept as the ladder's baseline and as a second implementation to test against.
#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace nexus::cpu {

void attention_naive(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                     const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                     ThreadPool& pool) {
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t q_width = p.n_heads * hd;
  pool.run([&](int ti, int nt) {
    std::vector<float> k, v, tmp(kv.row_width()), score;
    const int64_t items = n * p.n_kv_heads;
    for (int64_t it = ti; it < items; it += nt) {
      const int64_t t = it / p.n_kv_heads;
      const int64_t kvh = it % p.n_kv_heads;
      const int32_t hi = pos[t];
      const int32_t lo = first_visible_key(hi, p);
      const int32_t cnt = hi - lo + 1;
      k.resize(static_cast<size_t>(cnt) * hd);
      v.resize(static_cast<size_t>(cnt) * hd);
      score.resize(cnt);
      kv.load_k(layer, seq[t], lo, cnt, kvh, k.data(), tmp.data());
      kv.load_v(layer, seq[t], lo, cnt, kvh, v.data(), tmp.data());
      for (int64_t g = 0; g < group; ++g) {
        const float* qh = q + t * q_width + (kvh * group + g) * hd;
        float m = -std::numeric_limits<float>::infinity();
        for (int32_t j = 0; j < cnt; ++j) {
          float d = 0.0f;
          for (int64_t e = 0; e < hd; ++e) d += qh[e] * k[j * hd + e];
          score[j] = d * p.scale;
          m = std::max(m, score[j]);
        }
        float z = 0.0f;
        for (int32_t j = 0; j < cnt; ++j) z += (score[j] = std::exp(score[j] - m));
        float* o = out + t * q_width + (kvh * group + g) * hd;
        std::fill(o, o + hd, 0.0f);
        for (int32_t j = 0; j < cnt; ++j)
          for (int64_t e = 0; e < hd; ++e) o[e] += score[j] * v[j * hd + e];
        const float inv = 1.0f / z;
        for (int64_t e = 0; e < hd; ++e) o[e] *= inv;
      }
    }
  });
}

}  // namespace nexus::cpu
