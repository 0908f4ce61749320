// AVX512-VNNI kernel over the Q8_0x8 layout (repack.h), on 256-bit registers: the AVX2 kernel's
// passes (dot_q8_0x8_avx2.cc) with its integer products done by vpdpbusd, which multiplies
// unsigned by signed bytes and adds each four products into an int32 lane. Per column (272
// bytes, eight rows) and token:
//   - the eight code loads are flipped to unsigned by one XOR with 0x80 each (w + 128), shared by
//     every token of the pass, instead of two vpsignb per load and token;
//   - two vpdpbusd per pair of rows (elements 0-15 and 16-31 against the activation halves
//     broadcast to both lanes) replace two maddubs, two madd and an add;
//   - the + 128 * sum(y) the flip adds to every row is taken out by starting the pair sums from
//     -128 * y (two more vpdpbusd per token and column);
//   - then the AVX2 kernel's hadds, conversion and FMA.
// The integer block sums are exact either way, so outputs are bit-identical to the AVX2 kernel
// and to gemm_q8_0x8_ref. Without the products' arithmetic (loads and prefetch only) Q06B Q8_0
// decoded 14% faster than with the AVX2 kernel: the kernel's instructions, not only the memory,
// set the speed of this layout.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/simd_avx512.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ8_0);  // 272
constexpr size_t kPrefetchAhead = 2048;  // as the AVX2 kernel

using avx512::load256;
using avx512::sum4_i32;

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));  // also 128 as an unsigned byte
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = w + static_cast<size_t>(i) * kColumnBytes;
    const char* pf = reinterpret_cast<const char*>(col + kPrefetchAhead);
    for (size_t o = 0; o < kColumnBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    __m256i u[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) u[j] = _mm256_xor_si256(load256(col + 16 + 32 * j), flip);
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      const __m256i y0 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      const __m256i y1 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      // -128 * y, summed four bytes per lane like the products: starting every pair sum from it
      // takes the flip's 128 * sum(y) back out of each row.
      const __m256i c = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), flip, y0),
                                            flip, y1);
      const __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(), c);
      __m256i s[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        s[p] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(start, u[2 * p], y0), u[2 * p + 1], y1);
      const __m256i rows = sum4_i32(s[0], s[1], s[2], s[3]);
      const __m256 dy = _mm256_set1_ps(_cvtsh_ss(b.d));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), _mm256_mul_ps(dw, dy), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemm_q8_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>,
                                       group_tokens<4>};
  gemm_x8_groups(kFns, k / kQK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
