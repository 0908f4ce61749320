// AVX-512 Q6_Kx8 kernel. The shared kernel (dot_q6_kx8_impl.h) runs on 256-bit vectors with one
// vpdpwssd per pair-sum update; this one keeps its order of steps but works on two pairs of rows
// per 512-bit vector (p = 2pp and 2pp + 1 in the two 256-bit halves: their ql and qh vectors are
// adjacent in the column, repack.h), so a 64-byte load, one shift, one mask and one vpternlogd
// (nibble | (high bits & 0x30)) build 64 codes, where the 256-bit kernel spends an and and an or
// per 32. The pair sums, the -32 offset and the per-super-block FMA are the same exact integers
// and the same FMA: bit-identical to gemm_q6_kx8_ref and the AVX2 kernel. Faster than the 256-bit
// loop both in L2 and from memory (BM_DecodeRows/14/3).
#include "backends/cpu/dot_q6_kx8_impl.h"

namespace nexus::cpu {
namespace {

inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// scale_pick for rows p (low 256 bits) and p + 1 (high): one in-lane shuffle serves both.
inline __m512i scale_pick2(int p, int e) {
  const int lo = 4 * p + 2 * e, hi = lo + 4;
  const auto word = [](int b) { return _mm512_set1_epi16(static_cast<short>(b | ((b + 1) << 8))); };
  return _mm512_mask_blend_epi16(0xFFFF0000u, word(lo), word(hi));
}

// The 256-bit halves of v. Here and below the zero-masked forms of extract and broadcast: GCC 12's
// unmasked ones start from an undefined vector, which -Wmaybe-uninitialized reports.
inline __m256i low_half(__m512i v) { return _mm512_maskz_extracti64x4_epi64(0xF, v, 0); }
inline __m256i high_half(__m512i v) { return _mm512_maskz_extracti64x4_epi64(0xF, v, 1); }

inline void settle512(__m512i& v) { asm("" : "+v"(v)); }

// One group (8 rows) against NX tokens, as group_tokens in dot_q6_kx8_impl.h.
template <int NX>
void group_tokens_zmm(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                      int64_t out_stride) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes, kPrefetchAhead, kPrefetchFar>(w, i);
    __m512i pair[NX][2];
    __m256i off[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      off[t] = _mm256_setzero_si256();
      pair[t][0] = pair[t][1] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int kq = 0; kq < 4; ++kq) {
        const int q = 4 * h + kq;
        const __m256i sc = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16 + 16 * q)));
        const __m512i sc2 = _mm512_maskz_broadcast_i64x4(0xFF, sc);
#pragma GCC unroll 4
        for (int t = 0; t < NX; ++t) {
          const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
          int32_t bs;
          __builtin_memcpy(&bs, b.bsums + 2 * q, 4);
          off[t] = _mm256_dpwssd_epi32(off[t], sc, _mm256_set1_epi32(bs));
        }
        const int a = kq % 2, shift = 2 * kq;
#pragma GCC unroll 2
        for (int e = 0; e < 2; ++e) {
          const int grp = 2 * q + e;
          __m512i y[NX];
#pragma GCC unroll 4
          for (int t = 0; t < NX; ++t)
            y[t] = _mm512_maskz_broadcast_i32x4(
                0xFFFF,
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                    reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i].qs + 16 * grp)));
#pragma GCC unroll 2
          for (int pp = 0; pp < 2; ++pp) {
            const __m512i lo =
                load512(col + kLowOffset + 32 * (((2 * h + a) * 2 + e) * 4 + 2 * pp));
            const __m512i hi = load512(col + kHighOffset + 32 * ((2 * h + e) * 4 + 2 * pp));
            const __m512i nib =
                kq < 2 ? _mm512_and_si512(lo, m4) : _mm512_and_si512(_mm512_srli_epi16(lo, 4), m4);
            const __m512i hb =
                shift <= 4 ? _mm512_slli_epi16(hi, 4 - shift) : _mm512_srli_epi16(hi, shift - 4);
            // nib | (hb & 0x30): truth table A | (B & C) = 0xF0 | (0xCC & 0xAA).
            const __m512i code = _mm512_ternarylogic_epi32(nib, hb, m30, 0xF8);
            const __m512i sp = _mm512_shuffle_epi8(sc2, scale_pick2(2 * pp, e));
#pragma GCC unroll 4
            for (int t = 0; t < NX; ++t) {
              pair[t][pp] = _mm512_dpwssd_epi32(pair[t][pp], _mm512_maddubs_epi16(code, y[t]), sp);
              settle512(pair[t][pp]);
            }
          }
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
      const __m256i rows = sum4_i32(low_half(pair[t][0]), high_half(pair[t][0]),
                                    low_half(pair[t][1]), high_half(pair[t][1]));
      const __m256i s = _mm256_sub_epi32(rows, _mm256_slli_epi32(off[t], 5));
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(b.d)), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemm_q6_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens_zmm<1>, group_tokens_zmm<2>,
                                       group_tokens_zmm<3>, group_tokens_zmm<4>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
