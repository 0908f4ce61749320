// The Q8_0x8 decode kernel (repack.h), shared by dot_q8_0x8_avx2.cc and dot_q8_0x8_vnni.cc, which
// differ only in how a token's four pair sums are formed (the Pairs policy). Everything here has
// internal linkage (an unnamed namespace), so the copy compiled with AVX-512 in the VNNI file can
// never stand in for the AVX2 file's; for the same reason it includes no header of inline AVX2
// helpers. Per 32-element block column (272 bytes, eight rows):
//   - eight 32-byte code vectors, each the same 16 elements of rows p and p + 4;
//   - per token, Pairs::sums gives one int32 vector per pair of rows (row p's partial sums in the
//     low half, p + 4's in the high) from the activation halves broadcast to both lanes;
//   - three hadds leave the eight exact block sums one row per lane, then one conversion and one
//     FMA with the eight d (one 16-byte load and vcvtph2ps) times d_y.
// The file-layout kernel pays a scale conversion, a multiply and an FMA per row and block, and
// one horizontal sum per row; here they are shared by eight rows. The block sums are exact
// integers either way, so both builds are bit-identical to gemm_q8_0x8_ref.
#pragma once

#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/x8_kernel_local.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ8_0);  // 272
// L2 prefetch 4 KiB ahead, half the Q4_0x8 kernel's (x8_kernel_local.h): faster than 8 KiB when
// the weights stream from DRAM, the case an ordinary L3 sees for every model (docs/KERNELS.md).
constexpr size_t kPrefetchFar = 4096;

// One group (8 rows) against NX tokens; out[t * out_stride + r]. Pairs::Column prepare(codes)
// takes a column's eight code vectors (at `codes`) once for all its tokens; Pairs::sums(column,
// y0, y1, s) writes the four pair sums of one token (y0, y1: its elements 0-15 and 16-31 broadcast
// to both lanes).
template <int NX, typename Pairs>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes, kX8PrefetchAhead, kPrefetchFar>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    const typename Pairs::Column column = Pairs::prepare(col + 16);
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      const __m256i y0 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      const __m256i y1 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      __m256i s[4];
      Pairs::sums(column, y0, y1, s);
      acc[t] = add_block(acc[t], s, dw, _cvtsh_ss(b.d));
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

template <typename Pairs>
void gemm_q8_0x8(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                 int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, Pairs>, group_tokens<2, Pairs>,
                                       group_tokens<3, Pairs>, group_tokens<4, Pairs>};
  gemm_x8_groups(kFns, k / kQK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace
}  // namespace nexus::cpu
