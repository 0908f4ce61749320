// Flash-style attention: for each (token, KV head) the group of query heads sharing that KV head
// walks the visible keys in tiles of kTile, keeping a running max and sum (online softmax), so
// memory is O(tile) and each K/V tile is converted to f32 once for the whole group.
#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention_block.h"
#include "backends/cpu/attention_decode.h"
#include "backends/cpu/attention_tile.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {
namespace {

constexpr int32_t kTile = 64;
// Heads narrower than this are loaded as whole cache rows (one conversion call per tile) instead
// of one call per row and head: the call overhead would dominate such small heads.
constexpr int64_t kNarrowHead = 32;
// One token over at least this many keys on more than one thread: each thread computes every head
// over its share of the keys, then the shares are joined (below). From 256 keys that beats the
// split by heads on cold caches (docs/KERNELS.md).
constexpr int32_t kSplitKeysMin = 256;

// Scratch of a thread's share of split keys: the kernel's, then its joinable result, then room
// for decode_over_runs (one more joinable result, and a max and sum per head).
size_t split_keys_floats(const AttentionParams& p) {
  return attn_decode_scratch_floats(p.n_heads) +
         2 * attn_decode_part_floats(p.n_heads, p.head_dim) + 2 * p.n_heads;
}

// The decode kernel `a` over keys [lo, lo + cnt) of `seq`: one call when they are one contiguous
// run of the cache (the usual case: a sequence that grew alone), else one call per run, each
// merged into a's result. `part` holds attn_decode_part_floats(heads, hd) + 2 * heads floats.
void decode_over_runs(AttnDecodeFn direct, AttnDecode a, const KvCache& kv, int64_t layer, int seq,
                      int32_t lo, int32_t cnt, float* part) {
  a.k = kv.k_row(layer, seq, lo);
  a.v = kv.v_row(layer, seq, lo);
  if (kv.run_end(seq, lo) - lo >= cnt) {
    a.cnt = cnt;
    direct(a);
    return;
  }
  const int64_t heads = (a.h1 - a.h0) * a.group, hd = a.hd;
  float* run_out = part;
  float* run_max = part + heads * hd;
  float* run_sum = run_max + heads;
  if (a.max == nullptr) {  // the caller wants the output only: the running max and sum live here
    a.max = run_sum + heads;
    a.sum = a.max + heads;
  }
  AttnDecode r = a;
  for (int32_t p = lo, left = cnt; left > 0;) {
    const int32_t n = std::min(left, kv.run_end(seq, p) - p);
    r.k = kv.k_row(layer, seq, p);
    r.v = kv.v_row(layer, seq, p);
    r.cnt = n;
    if (p != lo) {
      r.out = run_out;
      r.max = run_max;
      r.sum = run_sum;
    }
    direct(r);
    if (p != lo) attn_decode_merge(a.out, a.max, a.sum, run_out, run_max, run_sum, heads, hd);
    p += n;
    left -= n;
  }
}

}  // namespace

size_t attention_scratch_floats(const AttentionParams& p, int64_t kv_row_width) {
  const int64_t group = p.n_heads / p.n_kv_heads;
  return std::max({static_cast<size_t>(2 * kTile * kv_row_width + kv_row_width + group * kTile +
                                       p.n_heads * p.head_dim + 2 * p.n_heads + 64),
                   split_keys_floats(p), attention_block_scratch_floats(p, kv_row_width)});
}

void attention(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
               const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
               ThreadPool& pool, float* scratch) {
  if (n >= kBlockMinTokens && p.window == 0)
    return attention_blocks(q, kv, layer, seq, pos, n, p, out, pool, scratch);
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t q_width = p.n_heads * hd;
  const int64_t width = kv.row_width();
  const bool narrow = hd < kNarrowHead;
  const size_t per_thread = attention_scratch_floats(p, width);
  const auto tile_step = active_isa() == Isa::kAvx2 ? attn_tile_avx2 : attn_tile_scalar;
  const AttnDecodeFn direct = attn_decode_kernel(kv.type(), hd);
  // Scratch of decode_over_runs, after the kernel's (see split_keys_floats).
  const size_t part_off = attn_decode_scratch_floats(p.n_heads);
  const size_t part_floats = attn_decode_part_floats(p.n_heads, p.head_dim);
  auto body = [&](int ti, int nt) {
    float* s = scratch + ti * per_thread;
    // Work units: whole tokens when there are enough of them, else the KV heads of each token
    // split across threads (decode).
    const bool by_token = n >= nt;
    const int64_t h0 = by_token ? 0 : p.n_kv_heads * ti / nt;
    const int64_t h1 = by_token ? p.n_kv_heads : p.n_kv_heads * (ti + 1) / nt;
    if (direct != nullptr) {
      for (int64_t t = by_token ? ti : 0; t < n && h0 < h1; t += by_token ? nt : 1) {
        const int32_t hi = pos[t];
        const int32_t lo = first_visible_key(hi, p);
        const int64_t off = t * q_width + h0 * group * hd;
        decode_over_runs(direct,
                         {q + off, nullptr, nullptr, kv.row_stride(), h0, h1, 0, hd, group, p.scale,
                          s, out + off},
                         kv, layer, seq[t], lo, hi - lo + 1, s + part_off);
      }
      return;
    }
    float* kt = s;
    float* vt = kt + kTile * width;
    float* tmp = vt + kTile * width;
    float* sc = tmp + width;
    float* acc = sc + group * kTile;
    float* mx = acc + p.n_heads * hd;
    float* sum = mx + p.n_heads;
    for (int64_t t = by_token ? ti : 0; t < n; t += by_token ? nt : 1) {
      if (h0 >= h1) break;
      const int32_t hi = pos[t];
      const int32_t lo = first_visible_key(hi, p);
      std::fill(acc + h0 * group * hd, acc + h1 * group * hd, 0.0f);
      std::fill(mx + h0 * group, mx + h1 * group, -std::numeric_limits<float>::infinity());
      std::fill(sum + h0 * group, sum + h1 * group, 0.0f);
      for (int32_t j0 = lo; j0 <= hi; j0 += kTile) {
        const int32_t cnt = std::min(kTile, hi - j0 + 1);
        if (narrow) {
          kv.load_k_rows(layer, seq[t], j0, cnt, kt);
          kv.load_v_rows(layer, seq[t], j0, cnt, vt);
        }
        const int64_t stride = narrow ? width : hd;
        for (int64_t kvh = h0; kvh < h1; ++kvh) {
          if (!narrow) {
            kv.load_k(layer, seq[t], j0, cnt, kvh, kt, tmp);
            kv.load_v(layer, seq[t], j0, cnt, kvh, vt, tmp);
          }
          const float* kh = kt + (narrow ? kvh * hd : 0);
          const float* vh = vt + (narrow ? kvh * hd : 0);
          for (int64_t g = 0; g < group; ++g) {
            const int64_t h = kvh * group + g;
            tile_step({q + t * q_width + h * hd, kh, vh, stride, cnt, hd, p.scale, sc, acc + h * hd,
                       mx + h, sum + h});
          }
        }
      }
      for (int64_t h = h0 * group; h < h1 * group; ++h) {
        float* o = out + t * q_width + h * hd;
        const float inv = 1.0f / sum[h];
        for (int64_t e = 0; e < hd; ++e) o[e] = acc[h * hd + e] * inv;
      }
    }
  };
  // Tiny problems (small models, short contexts) are cheaper on one thread than a barrier.
  int64_t work = 0;
  for (int64_t t = 0; t < n; ++t) work += (pos[t] + 1) * q_width;
  if (work < 32 * 1024 || pool.size() == 1) {
    body(0, 1);
    return;
  }
  const int32_t lo0 = first_visible_key(pos[0], p);
  const int32_t cnt = pos[0] - lo0 + 1;
  if (n > 1 || direct == nullptr || cnt < kSplitKeysMin || cnt < pool.size()) {
    pool.run(body);
    return;
  }
  // One token over a long context: each thread takes every head over its share of the keys, so
  // it reads whole cache rows in order, not its heads' part of every row, and the shares are
  // joined (5-9% faster than the split by heads on cold caches). The bits now depend on the thread
  // count (they did not with the split by heads); each share and the join are within the parity
  // tests' 1e-5 of the reference.
  const int64_t heads = p.n_heads;
  pool.run([&](int ti, int nt) {
    const int32_t a = lo0 + static_cast<int32_t>(int64_t{cnt} * ti / nt);
    const int32_t b = lo0 + static_cast<int32_t>(int64_t{cnt} * (ti + 1) / nt);
    float* s = scratch + ti * per_thread;
    float* part = s + part_off;  // out, then max and sum (attn_decode_join's layout)
    float* max = part + heads * hd;
    decode_over_runs(direct,
                     {q, nullptr, nullptr, kv.row_stride(), 0, p.n_kv_heads, 0, hd, group, p.scale,
                      s, part, max, max + heads},
                     kv, layer, seq[0], a, b - a, part + part_floats);
  });
  attn_decode_join(scratch + part_off, per_thread, pool.size(), heads, hd, out);
}

void attention_reference(const float* q, const float* k, const float* v, int32_t pos,
                         const AttentionParams& p, float* out) {
  const int64_t hd = p.head_dim;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t kvw = p.n_kv_heads * hd;
  // Its own statement of the window rule (not first_visible_key), so the tests compare the kernels'
  // reading of it against an independent one.
  int32_t lo = 0;
  while (p.window > 0 && pos - lo >= p.window) ++lo;
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

}  // namespace nexus::cpu
