// Query-block attention (see attention_block.h). Per unit (block, KV head) and per key tile:
//   S = scale * Q_h K^T         (sgemm, rows of the block that see at least one key of the tile)
//   online softmax per row      (running max and sum; keys past a row's position get weight 0)
//   O_h = corr * O_h + P V      (sgemm with beta = 1, accumulating straight into `out`)
// and finally O_h /= sum. Units are claimed dynamically, latest (longest) blocks first.
#include "backends/cpu/attention_block.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "backends/cpu/attention_tile.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {
namespace {

struct Block {
  int64_t t0, len;
};

struct Unit {
  const float* q;
  const KvCache& kv;
  int64_t layer;
  int seq;
  int32_t p0;  // position of the block's first token
  Block b;
  int64_t kvh;
  const AttentionParams& p;
  float* out;
};

void run_unit(const Unit& u, float* s, AttnRowSoftmaxFn softmax) {
  const int64_t hd = u.p.head_dim;
  const int64_t group = u.p.n_heads / u.p.n_kv_heads;
  const int64_t qw = u.p.n_heads * hd;
  const int64_t nb = u.b.len;
  float* kt = s;
  float* vt = kt + kBlockKeyTile * hd;
  float* tmp = vt + kBlockKeyTile * hd;
  float* sc = tmp + u.kv.row_width();
  float* mx = sc + kQueryBlock * kBlockKeyTile;
  float* sum = mx + group * kQueryBlock;
  std::fill(mx, mx + group * nb, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + group * nb, 0.0f);
  for (int64_t i = 0; i < nb; ++i)
    std::fill_n(u.out + (u.b.t0 + i) * qw + u.kvh * group * hd, group * hd, 0.0f);
  const int32_t hi = u.p0 + static_cast<int32_t>(nb) - 1;
  for (int32_t j0 = 0; j0 <= hi; j0 += kBlockKeyTile) {
    const int32_t cnt = std::min(kBlockKeyTile, hi - j0 + 1);
    u.kv.load_k(u.layer, u.seq, j0, cnt, u.kvh, kt, tmp);
    u.kv.load_v(u.layer, u.seq, j0, cnt, u.kvh, vt, tmp);
    const int64_t i0 = std::max<int64_t>(0, j0 - u.p0);  // first row that sees key j0
    const int64_t m = nb - i0;
    for (int64_t g = 0; g < group; ++g) {
      const int64_t h = u.kvh * group + g;
      const float* qh = u.q + (u.b.t0 + i0) * qw + h * hd;
      float* oh = u.out + (u.b.t0 + i0) * qw + h * hd;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), cnt,
                  static_cast<int>(hd), u.p.scale, qh, static_cast<int>(qw), kt,
                  static_cast<int>(hd), 0.0f, sc, kBlockKeyTile);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t i = i0 + r;
        const int32_t valid = std::min<int32_t>(cnt, u.p0 + static_cast<int32_t>(i) - j0 + 1);
        float* row = sc + r * kBlockKeyTile;
        const float corr = softmax(row, valid, mx + g * nb + i, sum + g * nb + i);
        std::fill(row + valid, row + cnt, 0.0f);
        if (corr != 1.0f)
          for (int64_t e = 0; e < hd; ++e) oh[r * qw + e] *= corr;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(hd), cnt, 1.0f, sc, kBlockKeyTile, vt, static_cast<int>(hd),
                  1.0f, oh, static_cast<int>(qw));
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = u.kvh * group + g;
    for (int64_t i = 0; i < nb; ++i) {
      float* o = u.out + (u.b.t0 + i) * qw + h * hd;
      const float inv = 1.0f / sum[g * nb + i];
      for (int64_t e = 0; e < hd; ++e) o[e] *= inv;
    }
  }
}

}  // namespace

size_t attention_block_scratch_floats(const AttentionParams& p, int64_t kv_row_width) {
  const int64_t group = p.n_heads / p.n_kv_heads;
  return static_cast<size_t>(2 * kBlockKeyTile * p.head_dim + kv_row_width +
                             kQueryBlock * kBlockKeyTile + 2 * group * kQueryBlock + 64);
}

void attention_blocks(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                      const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                      ThreadPool& pool, float* scratch) {
  pin_blas_to_one_thread();
  std::vector<Block> blocks;
  int64_t work = 0;  // query x key pairs, to decide whether threads pay off
  for (int64_t t = 0; t < n;) {
    int64_t len = 1;
    while (t + len < n && len < kQueryBlock && seq[t + len] == seq[t] &&
           pos[t + len] == pos[t] + len)
      ++len;
    blocks.push_back({t, len});
    work += len * (pos[t] + len);
    t += len;
  }
  const int64_t n_units = static_cast<int64_t>(blocks.size()) * p.n_kv_heads;
  const AttnRowSoftmaxFn softmax =
      active_isa() == Isa::kAvx2 ? attn_row_softmax_avx2 : attn_row_softmax_scalar;
  const size_t per_thread = attention_block_scratch_floats(p, kv.row_width());
  std::atomic<int64_t> next{0};
  auto body = [&](int ti, int) {
    float* s = scratch + ti * per_thread;
    for (int64_t u = next.fetch_add(1); u < n_units; u = next.fetch_add(1)) {
      // Latest blocks (the most keys) first, so the short ones fill in at the end.
      const Block& b = blocks[blocks.size() - 1 - u / p.n_kv_heads];
      run_unit({q, kv, layer, seq[b.t0], pos[b.t0], b, u % p.n_kv_heads, p, out}, s, softmax);
    }
  };
  if (pool.size() == 1 || n_units == 1 || work * p.n_heads * p.head_dim < 256 * 1024)
    body(0, 1);
  else
    pool.run(body);
}

}  // namespace nexus::cpu
