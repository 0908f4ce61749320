// AMX-BF16 GEMM (gemm_amx.h). op(A) is converted into bf16 rows of kp = k rounded up to 32 (zero
// padded, mp = m rounded up to 32 rows), once for all the threads sharing it; op(B) is packed 32
// columns at a time into the tile layout tdpbf16ps wants (per k step of 32: 16 rows of 16 column
// pairs (B[2r][j], B[2r + 1][j]), two such tiles for the 32 columns), and every 32-row block of C
// meets it as a 2 x 2 block of 16 x 16 f32 accumulator tiles over the k steps. Blocks at the edges
// of C go through a 32 x 32 scratch block. Tiles: 0-3 C, 4-5 A, 6-7 B.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/amx_tiles.h"
#include "backends/cpu/gemm_amx.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

using amx::bf16_lanes;
using amx::bf16x32;
using amx::round_up;
using amx::TileConfig;

// Lane j: the bf16 of lo[j] in the low half, of hi[j] in the high half (a k pair).
inline __m512i bf16_pairs(__m512 lo, __m512 hi) {
  return _mm512_or_si512(bf16_lanes(lo), _mm512_maskz_slli_epi32(0xFFFF, bf16_lanes(hi), 16));
}

// Lanes j < cnt of row p (columns j0 + j) of a row-major matrix, 0 elsewhere.
inline __m512 row16(const float* x, int64_t ld, int64_t p, int64_t j0, int64_t cnt) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << cnt) - 1u), x + p * ld + j0);
}


// (Here the zero-masked forms of shifts, conversions and inserts: GCC 12's unmasked ones start
// from an undefined vector, which -Wmaybe-uninitialized reports.)

// Rows [r0, r1) of op(A) as bf16 rows of kp (k pairs: row i at i * kp / 2), zero padded past k
// and past m; r0 a multiple of 16.
void convert_a(bool trans, int64_t m, int64_t k, const float* a, int64_t lda, int64_t kp,
               int64_t r0, int64_t r1, uint16_t* out) {
  std::memset(out + r0 * kp, 0, static_cast<size_t>((r1 - r0) * kp) * sizeof(uint16_t));
  r1 = std::min(r1, m);
  auto* pairs = reinterpret_cast<int32_t*>(out);
  if (!trans) {
    for (int64_t i = r0; i < r1; ++i) {
      int64_t p = 0;
      for (; p + 32 <= k; p += 32)
        _mm512_storeu_si512(out + i * kp + p, bf16x32(_mm512_loadu_ps(a + i * lda + p),
                                                      _mm512_loadu_ps(a + i * lda + p + 16)));
      for (; p < k; ++p) out[i * kp + p] = f32_to_bf16(a[i * lda + p]);
    }
    return;
  }
  // A^T: rows p, p + 1 of a give the k pair (p, p + 1) of 16 output rows at once, scattered to
  // those rows.
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(kp / 2)));
  for (int64_t i0 = r0; i0 < r1; i0 += 16) {
    const int64_t cnt = std::min<int64_t>(16, r1 - i0);
    const auto mask = static_cast<__mmask16>((1u << cnt) - 1u);
    for (int64_t p = 0; p < k; p += 2) {
      const __m512 lo = row16(a, lda, p, i0, cnt);
      const __m512 hi = p + 1 < k ? row16(a, lda, p + 1, i0, cnt) : _mm512_setzero_ps();
      _mm512_mask_i32scatter_epi32(pairs + i0 * (kp / 2) + p / 2, mask, idx, bf16_pairs(lo, hi), 4);
    }
  }
}

// Columns [j0, j0 + 32) of op(B) in tile order: [kp / 32][2 tiles][16 rows r][16 columns j] k
// pairs (B[ks + 2r][j], B[ks + 2r + 1][j]).
void pack_b(bool trans, int64_t n, int64_t k, const float* b, int64_t ldb, int64_t j0, int64_t kp,
            uint16_t* out) {
  auto* pairs = reinterpret_cast<int32_t*>(out);
  std::memset(out, 0, static_cast<size_t>(kp * 32) * sizeof(uint16_t));
  if (!trans) {  // B[p][j]: rows p, p + 1 side by side give a tile row directly
    for (int t = 0; t < 2; ++t) {
      const int64_t jt = j0 + 16 * t;
      if (jt >= n) break;
      const int64_t cnt = std::min<int64_t>(16, n - jt);
      for (int64_t p = 0; p < k; p += 2) {
        const __m512 lo = row16(b, ldb, p, jt, cnt);
        const __m512 hi = p + 1 < k ? row16(b, ldb, p + 1, jt, cnt) : _mm512_setzero_ps();
        const int64_t ks = p / 32 * 32, r = (p - ks) / 2;
        _mm512_storeu_si512(pairs + (ks / 32) * 512 + t * 256 + r * 16, bf16_pairs(lo, hi));
      }
    }
    return;
  }
  // B^T: B[p][j] = b[j * ldb + p]; column j's k pairs are 32 consecutive floats of row j of b,
  // scattered down the tile's column j (a stride of 16 pairs).
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(16));
  for (int64_t j = j0; j < std::min(n, j0 + 32); ++j) {
    const int64_t t = (j - j0) / 16, jj = (j - j0) % 16;
    for (int64_t ks = 0; ks < kp; ks += 32) {
      const int64_t cnt = std::clamp<int64_t>(k - ks, 0, 32);
      const auto m_lo = static_cast<__mmask16>(cnt >= 16 ? 0xFFFFu : (1u << cnt) - 1u);
      const auto m_hi = static_cast<__mmask16>(cnt >= 32   ? 0xFFFFu
                                               : cnt <= 16 ? 0u
                                                           : (1u << (cnt - 16)) - 1u);
      const __m512 v0 = _mm512_maskz_loadu_ps(m_lo, b + j * ldb + ks);
      const __m512 v1 = _mm512_maskz_loadu_ps(m_hi, b + j * ldb + ks + 16);
      // Elements 2r, 2r + 1 side by side: 32-bit lane r is the k pair r.
      const __m512i w16 = bf16x32(v0, v1);
      _mm512_i32scatter_epi32(pairs + (ks / 32) * 512 + t * 256 + jj, idx, w16, 4);
    }
  }
}

}  // namespace

size_t bf16_rows_size(int64_t m, int64_t k) {
  return static_cast<size_t>(round_up(std::max<int64_t>(m, 1), 32) *
                             round_up(std::max<int64_t>(k, 1), 32));
}

void convert_bf16_rows(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda, int64_t r0,
                       int64_t r1, uint16_t* rows) {
  convert_a(trans_a, m, k, a, lda, round_up(std::max<int64_t>(k, 1), 32), r0, r1, rows);
}

void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                   int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  thread_local std::vector<uint16_t> abuf;
  abuf.resize(bf16_rows_size(m, k));
  convert_bf16_rows(trans_a, m, k, a, lda, 0, round_up(m, 32), abuf.data());
  gemm_bf16_amx_rows(abuf.data(), m, k, trans_b, n, b, ldb, accumulate, c, ldc);
}

void gemm_bf16_amx_rows(const uint16_t* rows, int64_t m, int64_t k, bool trans_b, int64_t n,
                        const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  const int64_t mp = round_up(m, 32), kp = round_up(std::max<int64_t>(k, 1), 32);
  thread_local std::vector<uint16_t> bbuf;
  bbuf.resize(static_cast<size_t>(kp * 32));
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  alignas(64) float edge[32 * 32];
  const uint16_t* ab = rows;
  for (int64_t j0 = 0; j0 < n; j0 += 32) {
    pack_b(trans_b, n, k, b, ldb, j0, kp, bbuf.data());
    const uint16_t* bb = bbuf.data();
    for (int64_t i0 = 0; i0 < mp; i0 += 32) {
      const bool inside = i0 + 32 <= m && j0 + 32 <= n;
      // The block's C: in place inside, else the scratch block (its valid part copied in).
      float* cb = inside ? c + i0 * ldc + j0 : edge;
      const int64_t ld = inside ? ldc : 32;
      if (!inside) {
        std::fill(edge, edge + 32 * 32, 0.0f);
        if (accumulate)
          for (int64_t i = i0; i < std::min(m, i0 + 32); ++i)
            for (int64_t j = j0; j < std::min(n, j0 + 32); ++j)
              edge[(i - i0) * 32 + (j - j0)] = c[i * ldc + j];
      }
      const int64_t stride = ld * static_cast<int64_t>(sizeof(float));
      if (accumulate || !inside) {
        _tile_loadd(0, cb, stride);
        _tile_loadd(1, cb + 16, stride);
        _tile_loadd(2, cb + 16 * ld, stride);
        _tile_loadd(3, cb + 16 * ld + 16, stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      const int64_t a_stride = kp * static_cast<int64_t>(sizeof(uint16_t));
      for (int64_t ks = 0; ks < kp; ks += 32) {
        _tile_loadd(4, ab + i0 * kp + ks, a_stride);
        _tile_loadd(5, ab + (i0 + 16) * kp + ks, a_stride);
        _tile_loadd(6, bb + ks * 32, 64);
        _tile_loadd(7, bb + ks * 32 + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, cb, stride);
      _tile_stored(1, cb + 16, stride);
      _tile_stored(2, cb + 16 * ld, stride);
      _tile_stored(3, cb + 16 * ld + 16, stride);
      if (!inside)
        for (int64_t i = i0; i < std::min(m, i0 + 32); ++i)
          for (int64_t j = j0; j < std::min(n, j0 + 32); ++j)
            c[i * ldc + j] = edge[(i - i0) * 32 + (j - j0)];
    }
  }
  _tile_release();
}

}  // namespace nexus::cpu
