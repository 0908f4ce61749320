// Tiled driver over the per-type vec_dot kernels. Why tiles: decode (1 token) is bound by
// streaming the weights once; for several tokens a tile of weight rows (~kTileBytes) stays in L2
// while every token tile is applied to it, so weights come from memory once per call rather than
// once per token. Types with a rows x tokens kernel (vec_dot_tile: batched decode) take several
// weight rows and tokens per pass; types with a multi-row kernel (vec_dot_rows) decode each weight
// block once for up to kMaxDotRows tokens; the others call vec_dot per token.
#include "backends/cpu/gemm.h"

#include <algorithm>

#include "backends/cpu/quant.h"

namespace nexus::cpu {
namespace {

constexpr size_t kTileBytes = 128 * 1024;  // weight bytes per row tile (half a typical L2)
constexpr int64_t kTokenTile = 8;          // activation rows reused per weight row
constexpr size_t kTokenGroupBytes = 24 * 1024;  // activation bytes per token group (L1: 32 KiB)

// Batched decode (a few tokens) with a rows x tokens kernel: per weight-row tile (reused from L2
// by every token group), passes of kMaxTileRows rows x up to kMaxTileTokens tokens.
void gemm_rows_tiled(const GemmProblem& p, VecDotTileFn tile, int64_t r0, int64_t r1) {
  const int64_t row_tile = std::max<int64_t>(
      kMaxTileRows, static_cast<int64_t>(kTileBytes / std::max<size_t>(1, p.w_stride)));
  // Tokens per group: their activations stay in L1 while the tile's rows stream past (f32
  // activations of 8 tokens at k = 1024 would fill it: BM_DecodeTile F16, 8 tokens 0.7x of 4).
  int64_t group = kMaxTileTokens;
  while (group > 2 && static_cast<size_t>(group) * p.x_stride > kTokenGroupBytes) group /= 2;
  for (int64_t rt = r0; rt < r1; rt += row_tile) {
    const int64_t rt_end = std::min(r1, rt + row_tile);
    for (int64_t t = 0; t < p.n_tokens; t += group) {
      const int nx = static_cast<int>(std::min<int64_t>(group, p.n_tokens - t));
      for (int64_t r = rt; r < rt_end; r += kMaxTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(kMaxTileRows, rt_end - r));
        tile(p.k, p.w + static_cast<size_t>(r) * p.w_stride, p.w_stride,
             p.x + static_cast<size_t>(t) * p.x_stride, p.x_stride, nr, nx,
             p.y + t * p.y_stride + r, static_cast<size_t>(p.y_stride));
      }
    }
  }
}

}  // namespace

void gemm_rows(const GemmProblem& p, int64_t r0, int64_t r1) {
  const TypeKernels& k = kernels(p.w_type);
  if (p.n_tokens == 1 && k.vec_dot_wrows != nullptr) {
    // Decode with block weights: one activation block load serves up to kMaxWeightRows rows.
    for (int64_t r = r0; r < r1; r += kMaxWeightRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kMaxWeightRows, r1 - r));
      k.vec_dot_wrows(p.k, p.w + static_cast<size_t>(r) * p.w_stride, p.w_stride, p.x, nr, p.y + r);
    }
    return;
  }
  if (p.n_tokens > 1 && k.vec_dot_tile != nullptr) {
    gemm_rows_tiled(p, k.vec_dot_tile, r0, r1);
    return;
  }
  const int64_t row_tile =
      std::max<int64_t>(1, static_cast<int64_t>(kTileBytes / std::max<size_t>(1, p.w_stride)));
  for (int64_t rt = r0; rt < r1; rt += row_tile) {
    const int64_t rt_end = std::min(r1, rt + row_tile);
    for (int64_t t0 = 0; t0 < p.n_tokens; t0 += kTokenTile) {
      const int64_t t1 = std::min(p.n_tokens, t0 + kTokenTile);
      for (int64_t r = rt; r < rt_end; ++r) {
        const uint8_t* wr = p.w + static_cast<size_t>(r) * p.w_stride;
        if (k.vec_dot_rows != nullptr) {
          // Up to kMaxDotRows tokens share one decode of each weight block.
          for (int64_t t = t0; t < t1; t += kMaxDotRows) {
            const int nx = static_cast<int>(std::min<int64_t>(kMaxDotRows, t1 - t));
            float out[kMaxDotRows];
            k.vec_dot_rows(p.k, wr, p.x + static_cast<size_t>(t) * p.x_stride, p.x_stride, nx, out);
            for (int j = 0; j < nx; ++j) p.y[(t + j) * p.y_stride + r] = out[j];
          }
        } else {
          for (int64_t t = t0; t < t1; ++t)
            p.y[t * p.y_stride + r] = k.vec_dot(p.k, wr, p.x + static_cast<size_t>(t) * p.x_stride);
        }
      }
    }
  }
}

}  // namespace nexus::cpu
