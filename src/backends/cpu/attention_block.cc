// Query-block attention (see attention_block.h). Per unit (block, KV head) and per key tile
// (run_unit; run_unit_direct is the same on our GEMM against the cache in place):
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
#include "backends/cpu/gemm_f32.h"
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

// The same unit on our AVX2 GEMM reading the F32 or F16 cache in place (no K/V tile converted
// first): the group's query heads are stacked into one block of group * nb rows (row g * nb + i:
// head g of the group, token i), pre-scaled, so each tile is one score GEMM and one value GEMM
// for the whole group, and the output accumulates in scratch until the final division by the sum.
void run_unit_direct(const Unit& u, float* s, AttnRowSoftmaxFn softmax) {
  const int64_t hd = u.p.head_dim;
  const int64_t group = u.p.n_heads / u.p.n_kv_heads;
  const int64_t qw = u.p.n_heads * hd;
  const int64_t nb = u.b.len, rows = group * nb;
  float* qs = s;
  float* acc = qs + rows * hd;
  float* sc = acc + rows * hd;
  float* mx = sc + rows * kBlockKeyTile;
  float* sum = mx + rows;
  for (int64_t g = 0; g < group; ++g)
    for (int64_t i = 0; i < nb; ++i) {
      const float* src = u.q + (u.b.t0 + i) * qw + (u.kvh * group + g) * hd;
      float* dst = qs + (g * nb + i) * hd;
      for (int64_t e = 0; e < hd; ++e) dst[e] = src[e] * u.p.scale;
    }
  std::fill(acc, acc + rows * hd, 0.0f);
  std::fill(mx, mx + rows, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + rows, 0.0f);
  const bool half = u.kv.type() == DType::kF16;
  const int64_t elem = half ? 2 : 4, ld = static_cast<int64_t>(u.kv.row_stride()) / elem;
  // op(B) = K^T (trans_b) for the scores, V for the values: cache rows from position j0.
  auto product = [&](const uint8_t* row, bool trans_b, int64_t n, int64_t k, const float* a,
                     int64_t lda, bool accumulate, float* c, int64_t ldc) {
    const uint8_t* b = row + u.kvh * hd * elem;
    if (half)
      gemm_f32_half_b_avx2(false, trans_b, rows, n, k, a, lda, reinterpret_cast<const uint16_t*>(b),
                           ld, accumulate, c, ldc);
    else
      gemm_f32_avx2(false, trans_b, rows, n, k, a, lda, reinterpret_cast<const float*>(b), ld,
                    accumulate, c, ldc);
  };
  const int32_t hi = u.p0 + static_cast<int32_t>(nb) - 1;
  // Tiles of kBlockKeyTile keys, cut where the cache's run of consecutive blocks ends (the GEMMs
  // read the rows in place, one stride apart).
  for (int32_t j0 = 0, cnt = 0; j0 <= hi; j0 += cnt) {
    cnt = std::min({kBlockKeyTile, hi - j0 + 1, u.kv.run_end(u.seq, j0) - j0});
    product(u.kv.k_row(u.layer, u.seq, j0), true, cnt, hd, qs, hd, false, sc, kBlockKeyTile);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % nb;
      const int32_t valid = std::min<int32_t>(cnt, u.p0 + static_cast<int32_t>(i) - j0 + 1);
      float* row = sc + r * kBlockKeyTile;
      if (valid <= 0) {  // a row before this tile's first key (a block not on a tile boundary)
        std::fill(row, row + cnt, 0.0f);
        continue;
      }
      const float corr = softmax(row, valid, mx + r, sum + r);
      std::fill(row + valid, row + cnt, 0.0f);
      if (corr != 1.0f)
        for (int64_t e = 0; e < hd; ++e) acc[r * hd + e] *= corr;
    }
    product(u.kv.v_row(u.layer, u.seq, j0), false, hd, cnt, sc, kBlockKeyTile, true, acc, hd);
  }
  for (int64_t g = 0; g < group; ++g)
    for (int64_t i = 0; i < nb; ++i) {
      float* o = u.out + (u.b.t0 + i) * qw + (u.kvh * group + g) * hd;
      const float* a = acc + (g * nb + i) * hd;
      const float inv = 1.0f / sum[g * nb + i];
      for (int64_t e = 0; e < hd; ++e) o[e] = a[e] * inv;
    }
}

// Whether units run on our GEMM against the cache in place: F32 and F16 caches where prefill's
// weights go to it (prefill_on_our_gemm).
bool direct(const KvCache& kv) {
  return (kv.type() == DType::kF16 || kv.type() == DType::kF32) && prefill_on_our_gemm(kv.type());
}

}  // namespace

size_t attention_block_scratch_floats(const AttentionParams& p, int64_t kv_row_width) {
  const int64_t group = p.n_heads / p.n_kv_heads, rows = group * kQueryBlock;
  const int64_t converted = 2 * kBlockKeyTile * p.head_dim + kv_row_width +
                            kQueryBlock * kBlockKeyTile + 2 * group * kQueryBlock;
  const int64_t in_place = 2 * rows * p.head_dim + rows * kBlockKeyTile + 2 * rows;
  return static_cast<size_t>(std::max(converted, in_place) + 64);
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
  const auto run = direct(kv) ? run_unit_direct : run_unit;
  const size_t per_thread = attention_block_scratch_floats(p, kv.row_width());
  std::atomic<int64_t> next{0};
  auto body = [&](int ti, int) {
    float* s = scratch + ti * per_thread;
    for (int64_t u = next.fetch_add(1); u < n_units; u = next.fetch_add(1)) {
      // Latest blocks (the most keys) first, so the short ones fill in at the end.
      const Block& b = blocks[blocks.size() - 1 - u / p.n_kv_heads];
      run({q, kv, layer, seq[b.t0], pos[b.t0], b, u % p.n_kv_heads, p, out}, s, softmax);
    }
  };
  if (pool.size() == 1 || n_units == 1 || work * p.n_heads * p.head_dim < 256 * 1024)
    body(0, 1);
  else
    pool.run(body);
}

}  // namespace nexus::cpu
