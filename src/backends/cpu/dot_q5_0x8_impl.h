// The Q5_0x8 decode kernel (repack.h), shared by dot_q5_0x8_avx2.cc and dot_q5_0x8_vnni.cc, which
// differ in how a fifth bit joins its nibble and how products reach the int32 sums (the Ops
// policy). Internal linkage only, as the other eight-row kernels (x8_kernel_local.h). Per
// 32-element block column (176 bytes, eight rows):
//   - the eight rows' qh words are one 32-byte load (rows 0-3 in the low lane, 4-7 in the high);
//   - per pair of rows p, p + 4: one 32-byte load of their qs bytes; a mask gives elements 0-15
//     of both rows (low nibbles), a shift and a mask elements 16-31; one in-lane byte shuffle of
//     the qh vector puts qh byte 4p + j / 8 (2 + 4p + j / 8 for the high half) in byte j, and
//     Ops::code sets bit 4 of the codes whose bit j % 8 there is set: unsigned codes 0..31;
//   - per token, Ops::dot adds the codes times the activation halves (broadcast to both lanes)
//     into one int32 vector per pair, which starts from -16 times the activations' sums (the
//     codes' +16 offset, once per token and column for all four pairs);
//   - three hadds leave the eight exact block sums one row per lane, then one conversion and one
//     FMA with the eight d times d_y.
// gemm_q5_0x8_ref performs the same exact integer sums and the same FMA: bit-identical.
#pragma once

#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/x8_kernel_local.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ5_0);  // 176
constexpr size_t kHighOffset = 16, kCodesOffset = 48;

// Byte j of each lane: qh byte 4p + 2e + j / 8 of that lane (row p in the low lane, p + 4 in the
// high), e = 0 for elements 0-15, 1 for 16-31.
inline __m256i high_pick(int p, int e) {
  const char b = static_cast<char>(4 * p + 2 * e);
  return _mm256_setr_epi8(b, b, b, b, b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1,
                          b + 1, b, b, b, b, b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1,
                          b + 1, b + 1);
}

// -16 times the sums of the activations y0, y1 (elements 0-15 and 16-31, both lanes), four
// elements per int32 lane like the products: the start of each pair sum.
template <typename Ops>
inline __m256i minus16_sum(__m256i c16, __m256i y0, __m256i y1) {
  const __m256i s = Ops::dot(Ops::dot(_mm256_setzero_si256(), c16, y0), c16, y1);
  return _mm256_sub_epi32(_mm256_setzero_si256(), s);
}

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX, typename Ops>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), c16 = _mm256_set1_epi8(0x10);
  // Byte j: bit j % 8.
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    const __m256i qh = load256(col + kHighOffset);
    __m256i y0[NX], y1[NX], s[NX][4];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      y0[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      y1[t] =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      const __m256i start = minus16_sum<Ops>(c16, y0[t], y1[t]);
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) s[t][p] = start;
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load256(col + kCodesOffset + 32 * p);
      const __m256i lo =
          Ops::code(_mm256_and_si256(q, m4), _mm256_shuffle_epi8(qh, high_pick(p, 0)), bit, c16);
      const __m256i hi = Ops::code(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                   _mm256_shuffle_epi8(qh, high_pick(p, 1)), bit, c16);
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) s[t][p] = Ops::dot(Ops::dot(s[t][p], lo, y0[t]), hi, y1[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      acc[t] = add_block(acc[t], s[t], dw, _cvtsh_ss(b.d));
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

template <typename Ops>
void gemm_q5_0x8(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                 int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, Ops>, group_tokens<2, Ops>,
                                       group_tokens<3, Ops>, group_tokens<4, Ops>};
  gemm_x8_groups(kFns, k / kQK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace
}  // namespace nexus::cpu
