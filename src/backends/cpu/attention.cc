// Flash-style attention: for each (token, KV head) the group of query heads sharing that KV head
// walks the visible keys in tiles of kTile, keeping a running max and sum (online softmax), so
// memory is O(tile) and each K/V tile is converted to f32 once for the whole group.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_naive.h"
#include "profile/op_args.h"

namespace nexus {
namespace {

constexpr int32_t kTile = 64;

}  // namespace

size_t attention_scratch_floats(const AttentionParams& p, int64_t kv_row_width) {
  const int64_t group = p.n_heads / p.n_kv_heads;
  return static_cast<size_t>(2 * kTile * p.head_dim + kv_row_width + group * kTile +
                             group * p.head_dim + 2 * group + 64);
}

void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch) {
  if (current_attention_impl() == AttentionImpl::kNaive)
    return attention_naive(q, kv, layer, seq, pos, n, p, out, pool);
  NEXUS_PROFILE_OP("attention", static_cast<int>(layer), profile::attention_bytes(kv, pos, n, p),
                   profile::attention_flops(pos, n, p), profile::attention_shapes(kv, n, p));
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t q_width = p.n_heads * hd;
  const size_t per_thread = attention_scratch_floats(p, kv.row_width());
  pool.run([&](int ti, int nt) {
    float* s = scratch + ti * per_thread;
    float* kt = s;
    float* vt = kt + kTile * hd;
    float* tmp = vt + kTile * hd;
    float* sc = tmp + kv.row_width();
    float* acc = sc + group * kTile;
    float* mx = acc + group * hd;
    float* sum = mx + group;
    const int64_t items = n * p.n_kv_heads;
    for (int64_t it = ti; it < items; it += nt) {
      const int64_t t = it / p.n_kv_heads;
      const int64_t kvh = it % p.n_kv_heads;
      const int32_t hi = pos[t];
      const int32_t lo = p.window > 0 ? std::max<int32_t>(0, hi - static_cast<int32_t>(p.window) + 1) : 0;
      std::fill(acc, acc + group * hd, 0.0f);
      std::fill(mx, mx + group, -std::numeric_limits<float>::infinity());
      std::fill(sum, sum + group, 0.0f);
      for (int32_t j0 = lo; j0 <= hi; j0 += kTile) {
        const int32_t cnt = std::min(kTile, hi - j0 + 1);
        kv.load_k(layer, seq[t], j0, cnt, kvh, kt, tmp);
        kv.load_v(layer, seq[t], j0, cnt, kvh, vt, tmp);
        for (int64_t g = 0; g < group; ++g) {
          const float* qh = q + t * q_width + (kvh * group + g) * hd;
          float* sg = sc + g * kTile;
          float tile_max = -std::numeric_limits<float>::infinity();
          for (int32_t j = 0; j < cnt; ++j) {
            float d = 0.0f;
            for (int64_t e = 0; e < hd; ++e) d += qh[e] * kt[j * hd + e];
            sg[j] = d * p.scale;
            tile_max = std::max(tile_max, sg[j]);
          }
          const float m_new = std::max(mx[g], tile_max);
          const float corr = std::exp(mx[g] - m_new);  // exp(-inf) = 0 on the first tile
          float* ag = acc + g * hd;
          for (int64_t e = 0; e < hd; ++e) ag[e] *= corr;
          float add = 0.0f;
          for (int32_t j = 0; j < cnt; ++j) {
            const float w = std::exp(sg[j] - m_new);
            add += w;
            for (int64_t e = 0; e < hd; ++e) ag[e] += w * vt[j * hd + e];
          }
          sum[g] = sum[g] * corr + add;
          mx[g] = m_new;
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        float* o = out + t * q_width + (kvh * group + g) * hd;
        const float inv = 1.0f / sum[g];
        for (int64_t e = 0; e < hd; ++e) o[e] = acc[g * hd + e] * inv;
      }
    }
  });
}

void attention_reference(const float* q, const float* k, const float* v, int32_t pos,
                         const AttentionParams& p, float* out) {
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t kvw = p.n_kv_heads * hd;
  const int32_t lo = p.window > 0 ? std::max<int32_t>(0, pos - static_cast<int32_t>(p.window) + 1) : 0;
  std::vector<double> w(pos + 1);
  for (int64_t h = 0; h < p.n_heads; ++h) {
    const int64_t kvh = h / group;
    double m = -std::numeric_limits<double>::infinity();
    for (int32_t j = lo; j <= pos; ++j) {
      double d = 0.0;
      for (int64_t e = 0; e < hd; ++e) d += double(q[h * hd + e]) * k[j * kvw + kvh * hd + e];
      w[j] = d * p.scale;
      m = std::max(m, w[j]);
    }
    double z = 0.0;
    for (int32_t j = lo; j <= pos; ++j) z += (w[j] = std::exp(w[j] - m));
    for (int64_t e = 0; e < hd; ++e) {
      double o = 0.0;
      for (int32_t j = lo; j <= pos; ++j) o += w[j] * v[j * kvw + kvh * hd + e];
      out[h * hd + e] = static_cast<float>(o / z);
    }
  }
}

}  // namespace nexus
