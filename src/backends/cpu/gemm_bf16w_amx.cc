// AMX-BF16 prefill against BF16 weights (gemm_amx.h): Y^T = W X^T, so that the weight rows are the
// A tiles, loaded straight from the tensor (no packing of the weights), and the activations,
// rounded to bf16 once per matmul, are the B tiles: token block jt (16 tokens) and k step ks (32)
// make one 1 KiB tile of 16 rows r x 16 tokens j holding the k pair (X[j][32 ks + 2r], X[j][...
// + 1]). Each 32-row x 32-token block is a 2 x 2 block of f32 accumulator tiles, stored to a
// scratch block and written to Y transposed. Tiles: 0-3 C, 4-5 A, 6-7 B.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/amx_tiles.h"
#include "backends/cpu/gemm_amx.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

// 32 floats from p as 32 bf16.
inline __m512i bf16x32_at(const float* p) {
  return amx::bf16x32(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16));
}

using amx::round_up;
using amx::TileConfig;

}  // namespace

size_t bf16_act_size(int64_t n, int64_t k) {
  return static_cast<size_t>(round_up(std::max<int64_t>(n, 1), 32) * round_up(k, 32));
}

void pack_bf16_act(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t b0, int64_t b1,
                   uint16_t* out) {
  const int64_t ksteps = k / 32;
  auto* pairs = reinterpret_cast<int32_t*>(out);
  // Tile row r of the block's tile ks is 16 tokens apart from the next: a scatter of stride 16.
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(16));
  for (int64_t jt = b0; jt < b1; ++jt) {
    int32_t* tiles = pairs + jt * ksteps * 256;
    std::memset(tiles, 0, static_cast<size_t>(ksteps) * 1024);
    for (int64_t j = jt * 16; j < std::min(n, jt * 16 + 16); ++j)
      for (int64_t ks = 0; ks < ksteps; ++ks)
        _mm512_i32scatter_epi32(tiles + ks * 256 + (j - jt * 16), idx,
                                bf16x32_at(x + j * ldx + ks * 32), 4);
  }
}

void gemm_bf16w_amx_rows(const uint16_t* w, int64_t ldw, int64_t r0, int64_t r1, int64_t k,
                         const uint16_t* xp, int64_t n, float* y, int64_t ldy) {
  if (r0 >= r1 || n <= 0) return;
  const int64_t ksteps = k / 32, np = round_up(n, 32);
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  alignas(64) float blk[32 * 32];
  thread_local std::vector<uint16_t> tail;  // the last block's rows, zero padded to 32
  for (int64_t rb = r0; rb < r1; rb += 32) {
    const int64_t nr = std::min<int64_t>(32, r1 - rb);
    const uint16_t* a = w + rb * ldw;
    int64_t lda = ldw;
    if (nr < 32) {
      tail.assign(static_cast<size_t>(32 * k), 0);
      for (int64_t i = 0; i < nr; ++i)
        std::memcpy(tail.data() + i * k, a + i * ldw, static_cast<size_t>(k) * sizeof(uint16_t));
      a = tail.data();
      lda = k;
    }
    const int64_t a_stride = lda * static_cast<int64_t>(sizeof(uint16_t));
    for (int64_t jb = 0; jb < np; jb += 32) {
      const uint16_t* b0 = xp + (jb / 16) * ksteps * 512;
      const uint16_t* b1 = b0 + ksteps * 512;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t ks = 0; ks < ksteps; ++ks) {
        _tile_loadd(4, a + ks * 32, a_stride);
        _tile_loadd(5, a + 16 * lda + ks * 32, a_stride);
        _tile_loadd(6, b0 + ks * 512, 64);
        _tile_loadd(7, b1 + ks * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      // blk[row][token]: rows 0-15 / 16-31 by tokens 0-15 / 16-31.
      _tile_stored(0, blk, 128);
      _tile_stored(1, blk + 16, 128);
      _tile_stored(2, blk + 16 * 32, 128);
      _tile_stored(3, blk + 16 * 32 + 16, 128);
      for (int64_t j = 0; j < std::min<int64_t>(32, n - jb); ++j) {
        float* yr = y + (jb + j) * ldy + rb;
        for (int64_t i = 0; i < nr; ++i) yr[i] = blk[i * 32 + j];
      }
    }
  }
  _tile_release();
}

}  // namespace nexus::cpu
