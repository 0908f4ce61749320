// The Q4_Kx8 decode kernel (repack.h), shared by dot_q4_kx8_avx2.cc and dot_q4_kx8_vnni.cc, which
// differ only in how a sub-block's products reach a pair sum (Pairs::step below). Everything here
// has internal linkage (an unnamed namespace), so the copy compiled with AVX-512 in the VNNI file
// can never stand in for the AVX2 file's. Eight weight rows x 1-4 tokens per pass; per
// super-block column (1152 bytes, eight rows):
//   - the 8 x 12 packed scale bytes are three 32-byte loads; five masks and shifts give each row's
//     eight 6-bit scales and mins as bytes (sub-blocks 0-3 in one vector, 4-7 in another);
//   - per sub-block (32 elements) and pair of rows p, p + 4 (the two lanes of a code vector): the
//     nibbles of two code loads against the sub-block's activation halves, broadcast to both
//     lanes, times the rows' scale (one in-lane byte shuffle of the scale bytes), added into one
//     int32 vector per pair: four lanes per row, summed to one lane per row by two levels of hadd
//     once per super-block;
//   - the mins meet the Q8_K group-pair sums in four madds and three hadds per token;
//   - the eight d and dmin are one 16-byte load and one vcvtph2ps each.
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

inline __m256i bcast128(const int8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Pins v to a register at this point (as in dot_q6_kx8_impl.h: without it GCC may compute every
// product of a super-block first and spill them).
inline void settle(__m256i& v) { asm("" : "+x"(v)); }

// One group (8 rows) against NX tokens; out[t * out_stride + r]. Pairs supplies
//   - scale(sc, p, j): the multiplier vector of rows p, p + 4 for scale byte j (0..3) of `sc`
//     (each row's 32-bit lane holds four sub-blocks' scales);
//   - step(acc, a, b, y0, y1, s): acc plus s times the products of the codes a, b (rows p | p + 4,
//     16 each) with y0, y1 (the sub-block's two activation halves), four int32 lanes per row.
template <int NX, typename Pairs>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  // The min sums come out in row order 0, 2, 4, 6, 1, 3, 5, 7; dmin is permuted to match and the
  // min accumulator back at the end.
  const __m256i to_min_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i to_row_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 acc[NX], macc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    const __m256 mw = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16))), to_min_order);
    const __m256i u0 = load256(col + 32), u1 = load256(col + 64), u2 = load256(col + 96);
    // Each row's 32-bit lane: scales (mins) of sub-blocks 0-3 in sc_lo (mn_lo), 4-7 in sc_hi.
    const __m256i sc_lo = _mm256_and_si256(u0, m6);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30));
    const __m256i mn_lo = _mm256_and_si256(u1, m6);
    const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                                          _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30));
    // Rows' eight mins as int16: rows 0,1 | 4,5 and rows 2,3 | 6,7 per 128-bit lane pair.
    const __m256i m01 = _mm256_unpacklo_epi32(mn_lo, mn_hi);
    const __m256i m23 = _mm256_unpackhi_epi32(mn_lo, mn_hi);
    const __m256i mr01 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m01));
    const __m256i mr45 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m01, 1));
    const __m256i mr23 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m23));
    const __m256i mr67 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m23, 1));

    __m256i pair[NX][4];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t)
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) pair[t][p] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i scv = c < 2 ? sc_lo : sc_hi;
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {  // sub-block 2c + e: low (e = 0) or high nibbles
        const int j = (2 * c + e) % 4;
        __m256i y0[NX], y1[NX];
#pragma GCC unroll 4
        for (int t = 0; t < NX; ++t) {
          const int8_t* yq =
              reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i].qs + 64 * c + 32 * e;
          y0[t] = bcast128(yq);
          y1[t] = bcast128(yq + 16);
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          __m256i a = load256(col + 128 + 32 * ((2 * c) * 4 + p));
          __m256i b = load256(col + 128 + 32 * ((2 * c + 1) * 4 + p));
          if (e == 1) {
            a = _mm256_srli_epi16(a, 4);
            b = _mm256_srli_epi16(b, 4);
          }
          a = _mm256_and_si256(a, m4);
          b = _mm256_and_si256(b, m4);
          const __m256i s = Pairs::scale(scv, p, j);
#pragma GCC unroll 4
          for (int t = 0; t < NX; ++t) {
            pair[t][p] = Pairs::step(pair[t][p], a, b, y0[t], y1[t], s);
            settle(pair[t][p]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
      const __m256i sum = sum4_i32(pair[t][0], pair[t][1], pair[t][2], pair[t][3]);
      const __m128i bp =
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8)));
      const __m256i bb = _mm256_broadcastsi128_si256(bp);
      const __m256i x1 =
          _mm256_hadd_epi32(_mm256_madd_epi16(mr01, bb), _mm256_madd_epi16(mr23, bb));
      const __m256i y1 =
          _mm256_hadd_epi32(_mm256_madd_epi16(mr45, bb), _mm256_madd_epi16(mr67, bb));
      const __m256i mins = _mm256_hadd_epi32(x1, y1);  // rows 0, 2, 4, 6, 1, 3, 5, 7
      const __m256 dy = _mm256_set1_ps(b.d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, dy), acc[t]);
      macc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(mw, dy), macc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t)
    _mm256_storeu_ps(out + t * out_stride,
                     _mm256_sub_ps(acc[t], _mm256_permutevar8x32_ps(macc[t], to_row_order)));
}

template <typename Pairs>
void gemm_q4_kx8(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                 int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, Pairs>, group_tokens<2, Pairs>,
                                       group_tokens<3, Pairs>, group_tokens<4, Pairs>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace
}  // namespace nexus::cpu
