// The Q6_Kx8 decode kernel on 256-bit vectors (repack.h), run by dot_q6_kx8_avx2.cc;
// dot_q6_kx8_vnni.cc takes the layout constants, the scale shuffle and the prefetch distances
// from here and runs the same steps on 512-bit vectors. Everything here has internal linkage (an
// unnamed namespace), so the copy compiled with AVX-512 in the VNNI file can never stand in for
// the AVX2 file's; for the same reason it includes no header of inline AVX2 helpers. The layout
// and the kernel's steps:
//
// Kernel over the Q6_Kx8 layout (repack.h): eight weight rows x 1-4 tokens per pass. Per
// super-block column (1680 bytes, eight rows) and 16-element group g (the unit of a Q6_K scale):
//   - four code vectors (rows p and p + 4 in the two lanes), each a low or high nibble of a ql
//     load OR'ed with two bits of a qh load moved to bits 4-5 (codes 0..63, unsigned);
//   - maddubs against the group's 16 activations broadcast to both lanes (two products of at most
//     63 * 128 per int16: no saturation), then madd with the pair's scales (one in-lane byte
//     shuffle of the widened scale pair: row p's scale in the low lane, row p + 4's in the high),
//     accumulated in one int32 vector per pair;
//   - the -32 offset: the widened scales of groups 2q, 2q + 1 (one row per 32-bit lane) madd the
//     Q8_K group sums, once per token and super-block;
//   - per super-block three hadds bring the pair accumulators to one int32 per row lane, one
//     conversion and one FMA with the eight d (one 16-byte load and vcvtph2ps) times d_y.
// gemm_q6_kx8_ref performs the same exact integer sums and the same FMA: bit-identical.
#pragma once

#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/x8_kernel_local.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ6_K);  // 1680
constexpr size_t kLowOffset = 144, kHighOffset = 1168;
// Prefetch distances (fetch_column): the far one half the other layouts' (x8_kernel_local.h), where
// the Q6_K head read fastest; in the AVX2 builds 16 KiB (x8_far). Measured: docs/KERNELS.md.
constexpr size_t kPrefetchAhead = 2048, kPrefetchFar = x8_far(4096);

// In-lane shuffle of a widened scale pair vector (int16 2r + e = scale of row r, group 2q + e;
// rows 0-3 in the low lane, 4-7 in the high): 8 copies of row p's (p + 4's) int16 e.
inline __m256i scale_pick(int p, int e) {
  const int lo = 4 * p + 2 * e;
  return _mm256_set1_epi16(static_cast<short>(lo | ((lo + 1) << 8)));
}

// Pins v to a register at this point: without it GCC evaluates all 64 products of a super-block
// first, spills them (2 KiB of stack) and sums them afterwards (-24% in BM_DecodeRows).
inline void settle(__m256i& v) { asm("" : "+x"(v)); }

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes, kPrefetchAhead, kPrefetchFar>(w, i);
    __m256i pair[NX][4], off[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      off[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) pair[t][p] = _mm256_setzero_si256();
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int kq = 0; kq < 4; ++kq) {
        // Scales of groups 2q, 2q + 1 (q = 4h + kq) for the eight rows, widened to int16.
        const int q = 4 * h + kq;
        const __m256i sc = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16 + 16 * q)));
#pragma GCC unroll 4
        for (int t = 0; t < NX; ++t) {
          const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
          int32_t bs;
          __builtin_memcpy(&bs, b.bsums + 2 * q, 4);
          off[t] = _mm256_add_epi32(off[t], _mm256_madd_epi16(sc, _mm256_set1_epi32(bs)));
        }
        const int a = kq % 2, shift = 2 * kq;
#pragma GCC unroll 2
        for (int e = 0; e < 2; ++e) {
          const int grp = 2 * q + e;
          __m256i y[NX];
#pragma GCC unroll 4
          for (int t = 0; t < NX; ++t)
            y[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i].qs + 16 * grp)));
            // One pair of rows at a time keeps the working set in registers.
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) {
            const __m256i lo = load256(col + kLowOffset + 32 * (((2 * h + a) * 2 + e) * 4 + p));
            const __m256i hi = load256(col + kHighOffset + 32 * ((2 * h + e) * 4 + p));
            const __m256i nib =
                kq < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
            // qh bits 2kq, 2kq + 1 to bits 4-5 of the byte (16-bit shifts; the mask drops what
            // crossed a byte boundary).
            const __m256i hb =
                shift <= 4 ? _mm256_slli_epi16(hi, 4 - shift) : _mm256_srli_epi16(hi, shift - 4);
            const __m256i code = _mm256_or_si256(nib, _mm256_and_si256(hb, m30));
            const __m256i sp = _mm256_shuffle_epi8(sc, scale_pick(p, e));
#pragma GCC unroll 4
            for (int t = 0; t < NX; ++t) {
              pair[t][p] = _mm256_add_epi32(
                  pair[t][p], _mm256_madd_epi16(_mm256_maddubs_epi16(code, y[t]), sp));
              settle(pair[t][p]);
            }
          }
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_K& b = reinterpret_cast<const BlockQ8_K*>(x + t * x_stride)[i];
      // Pair accumulators [row p x4 | row p + 4 x4] to rows 0..7, one per lane.
      const __m256i rows = sum4_i32(pair[t][0], pair[t][1], pair[t][2], pair[t][3]);
      const __m256i s = _mm256_sub_epi32(rows, _mm256_slli_epi32(off[t], 5));
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(b.d)), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace
}  // namespace nexus::cpu
