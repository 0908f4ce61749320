// AVX2 kernel over the Q4_Kx8 layout (repack.h): eight weight rows x 1-4 tokens per pass, one row
// per int32 lane. Per super-block column (1152 bytes, eight rows):
//   - the 8 x 12 packed scale bytes are three 32-byte loads; five masks and shifts give each row's
//     eight 6-bit scales and mins as bytes (sub-blocks 0-3 in one vector, 4-7 in another);
//   - per sub-block (32 elements): four 32-byte code loads (rows p and p + 4 in the two lanes),
//     nibbles into maddubs against the activation halves broadcast to both lanes, two int16
//     hadds leave two partial sums per row in lane order, and one madd with the rows' scales
//     (one in-lane byte shuffle of the scale bytes) makes them one int32 per row. A lane sums at
//     most 16 products 15 * 128 = 30720 before the madd: no int16 saturation;
//   - the mins meet the Q8_K group-pair sums in four madds and three hadds per token;
//   - the eight d and dmin are one 16-byte load and one vcvtph2ps each.
// The scalar gemm_q4_kx8_ref performs the same exact integer sums and the same two FMAs per
// super-block, so the two are bit-identical.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ4_K);  // 1152
// Bytes ahead of the current column that are prefetched (a thread's groups are one stream).
constexpr size_t kPrefetchAhead = 2048;

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i bcast128(const int8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// In-lane shuffle controls: scale byte j of each row's 32-bit word into both int16 halves of the
// row's int32 lane (zero high bytes), for j = 0..3.
inline __m256i scale_pick(int j) {
  const int b = j | (0x80 << 8) | (j << 16) | (0x80 << 24);  // bytes j, zero, j, zero
  return _mm256_add_epi32(_mm256_set1_epi32(b),
                          _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004,
                                            0x00080008, 0x000C000C));
}

// int32 per row lane: sum over one sub-block of q * y, times the row's scale (in `sc`).
// v[p][e]: code vectors of the sub-block's chunk, nibbles selected by `shift` (0 low, 4 high).
template <int kShift>
inline __m256i sub_block(const __m256i v[4][2], __m256i y0, __m256i y1, __m256i sc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i d[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m256i a = _mm256_and_si256(_mm256_srli_epi16(v[p][0], kShift), m4);
    const __m256i b = _mm256_and_si256(_mm256_srli_epi16(v[p][1], kShift), m4);
    d[p] = _mm256_add_epi16(_mm256_maddubs_epi16(a, y0), _mm256_maddubs_epi16(b, y1));
  }
  const __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(d[0], d[1]), _mm256_hadd_epi16(d[2], d[3]));
  return _mm256_madd_epi16(h, sc);
}

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i pick[4] = {scale_pick(0), scale_pick(1), scale_pick(2), scale_pick(3)};
  // The min sums come out in row order 0, 2, 4, 6, 1, 3, 5, 7; dmin is permuted to match and the
  // min accumulator back at the end.
  const __m256i to_min_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i to_row_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 acc[NX], macc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = w + static_cast<size_t>(i) * kColumnBytes;
    const char* pf = reinterpret_cast<const char*>(col + kPrefetchAhead);
    for (size_t o = 0; o < kColumnBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
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

    __m256i sum[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256i v[4][2];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        v[p][0] = load256(col + 128 + 32 * ((2 * c) * 4 + p));
        v[p][1] = load256(col + 128 + 32 * ((2 * c + 1) * 4 + p));
      }
      const __m256i scv = c < 2 ? sc_lo : sc_hi;
      const __m256i s0 = _mm256_shuffle_epi8(scv, pick[(2 * c) % 4]);
      const __m256i s1 = _mm256_shuffle_epi8(scv, pick[(2 * c + 1) % 4]);
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) {
        const int8_t* yq = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i].qs + 64 * c;
        sum[t] = _mm256_add_epi32(sum[t], sub_block<0>(v, bcast128(yq), bcast128(yq + 16), s0));
        sum[t] =
            _mm256_add_epi32(sum[t], sub_block<4>(v, bcast128(yq + 32), bcast128(yq + 48), s1));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
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
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(dw, dy), acc[t]);
      macc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(mw, dy), macc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t)
    _mm256_storeu_ps(out + t * out_stride,
                     _mm256_sub_ps(acc[t], _mm256_permutevar8x32_ps(macc[t], to_row_order)));
}

}  // namespace

void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>,
                                       group_tokens<4>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
