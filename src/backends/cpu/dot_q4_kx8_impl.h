// The Q4_Kx8 decode kernel (repack.h), shared by dot_q4_kx8_avx2.cc and dot_q4_kx8_vnni.cc, which
// differ only in how products reach the int32 sums (the Sums policy below). Everything here has
// internal linkage (an unnamed namespace), so the copy compiled with AVX-512 in the VNNI file can
// never stand in for the AVX2 file's. Eight weight rows x 1-4 tokens per pass; per super-block
// column (1152 bytes, eight rows), one row per 32-bit lane throughout:
//   - the 8 x 12 packed scale bytes are three 32-byte loads; five masks and shifts give each row's
//     eight 6-bit scales and mins as bytes in its lane (sub-blocks 0-3 in one vector, 4-7 in
//     another), and one in-lane byte shuffle turns them into a sub-block's multipliers;
//   - 32 code vectors, vector 8c + v holding code bytes 32c + 4v .. 32c + 4v + 3 of row r in lane
//     r: one mask gives each row's elements 64c + 4v.. (sub-block 2c), one shift and a mask its
//     elements 64c + 32 + 4v.. (sub-block 2c + 1), once for all the tokens;
//   - per token and half sub-block (16 elements, four vectors), each vector meets the four matching
//     activation bytes broadcast to every lane, the four products per lane are summed (at most
//     16 * 15 * 128 = 30720, inside int16) and multiplied by the row's scale into the token's int32
//     sum S, with no horizontal step anywhere;
//   - the mins meet the Q8_K sub-block sums (bsums[2j] + bsums[2j + 1], one broadcast int16 pair)
//     in eight multiply-adds per token into M;
//   - the eight d and dmin are one 16-byte load and one vcvtph2ps each; per token and super-block
//     acc += S * (d * d_y), macc += M * (dmin * d_y), and the result is acc - macc.
// The scalar gemm_q4_kx8_ref performs the same exact integer sums and the same two FMAs per
// super-block, so every version is bit-identical to it.
#pragma once

#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/x8_kernel_local.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ4_K);  // 1152
// Prefetch distances (fetch_column): two columns ahead into L1 and eight into L2 (2,304 / 9,216
// bytes, about the other layouts' 2 / 8 KiB in x8_kernel_local.h; the AVX2 builds' far one is
// 16 KiB, x8_far there): faster than one and four columns and than 2 / 8 KiB, wider pairs within
// the noise; all at the column's start, not spread over its work (docs/KERNELS.md).
constexpr size_t kPrefetchAhead = 2 * kColumnBytes, kPrefetchFar = x8_far(8 * kColumnBytes);

// Byte j (0..3) of each 32-bit lane of v as the low int16 of that lane and, when kBoth, the high
// one; zero elsewhere. Lane d of a 128-bit half starts at byte 4d, and an index byte with its top
// bit set (0x80 + 4d) gives zero.
template <bool kBoth>
inline __m256i lane_byte(__m256i v, int j) {
  const int b = kBoth ? j | (0x80 << 8) | (j << 16) | (0x80 << 24)
                      : j | (0x80 << 8) | (0x80 << 16) | (0x80 << 24);
  constexpr int k = 0x04040404;
  return _mm256_shuffle_epi8(v, _mm256_setr_epi32(b, b + k, b + 2 * k, b + 3 * k, b, b + k,
                                                  b + 2 * k, b + 3 * k));
}

// One group (8 rows) against NX tokens; out[t * out_stride + r]. Sums supplies
//   - kBothHalves: whether half() wants a scale in both int16 of a lane (madd) or the low one;
//   - half(acc, q, y, s): acc plus s times the sum of the products of q[v] (codes 0..15, four per
//     lane) with y[4v .. 4v + 3], v < 4;
//   - mins(acc, m, bs): acc plus m (one min per lane, in both int16 halves) times bs[0] + bs[1].
template <int NX, typename Sums>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  constexpr bool kBoth = Sums::kBothHalves;
  const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc[NX], macc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes, kPrefetchAhead, kPrefetchFar>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16)));
    const __m256i u0 = load256(col + 32), u1 = load256(col + 64), u2 = load256(col + 96);
    // Each row's 32-bit lane: scales (mins) of sub-blocks 0-3 in sc_lo (mn_lo), 4-7 in sc_hi.
    const __m256i sc_lo = _mm256_and_si256(u0, m6);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30));
    const __m256i mn_lo = _mm256_and_si256(u1, m6);
    const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                                          _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30));
    __m256i s[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i scv = c < 2 ? sc_lo : sc_hi;
      const __m256i s_lo = lane_byte<kBoth>(scv, (2 * c) % 4);
      const __m256i s_hi = lane_byte<kBoth>(scv, (2 * c + 1) % 4);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m256i q = load256(col + 128 + 32 * (8 * c + 4 * h + v));
          lo[v] = _mm256_and_si256(q, m4);
          hi[v] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
#pragma GCC unroll 4
        for (int t = 0; t < NX; ++t) {
          const int8_t* yq =
              reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i].qs + 64 * c + 16 * h;
          s[t] = Sums::half(s[t], lo, yq, s_lo);
          s[t] = Sums::half(s[t], hi, yq + 32, s_hi);
        }
      }
    }
    // Each row's min of sub-block j in both int16 of its lane, once for all the tokens.
    __m256i mv[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) mv[j] = lane_byte<true>(j < 4 ? mn_lo : mn_hi, j % 4);
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
      __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) m = Sums::mins(m, mv[j], b.bsums + 2 * j);
      const __m256 dy = _mm256_set1_ps(b.d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, dy), acc[t]);
      macc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(mw, dy), macc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, _mm256_sub_ps(acc[t], macc[t]));
}

template <typename Sums>
void gemm_q4_kx8(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                 int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, Sums>, group_tokens<2, Sums>,
                                       group_tokens<3, Sums>, group_tokens<4, Sums>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace
}  // namespace nexus::cpu
