// AVX512-VNNI kernel over the Q4_0x8 layout (repack.h), on 256-bit registers: the AVX2 kernel's
// passes (dot_q4_0x8_avx2.cc) with the nibble products done by vpdpbusd (unsigned codes 0..15
// times signed activations, four products per int32 lane). Per column (144 bytes, eight rows):
//   - the nibble split is the AVX2 kernel's (four loads, one shift, two masks each), shared by the
//     pass's tokens;
//   - per token two vpdpbusd per pair of rows replace two maddubs, an add and, after the three
//     int16 hadds, a madd: the pair sums stay int32 and meet in three int32 hadds;
//   - the -8 offset: the pair sums start from -8 * y, summed four bytes per lane (two more
//     vpdpbusd per token and column), instead of subtracting 8 * sum(y) computed per call.
// The integer block sums are exact either way, and the float steps (d_w * d_y, conversion, FMA)
// are the AVX2 kernel's, so outputs are bit-identical to it and to gemm_q4_0x8_ref.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/simd_avx512.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = 8 * sizeof(BlockQ4_0);  // 144
constexpr size_t kPrefetchAhead = 2048;                 // as the AVX2 kernel

using avx512::load256;
using avx512::sum4_i32;

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = w + static_cast<size_t>(i) * kColumnBytes;
    const char* pf = reinterpret_cast<const char*>(col + kPrefetchAhead);
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    __m256i lo[4], hi[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i v = load256(col + 16 + 32 * p);
      lo[p] = _mm256_and_si256(v, m4);
      hi[p] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      const __m256i ylo =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      const __m256i yhi =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      const __m256i c = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, ylo),
                                            eight, yhi);
      const __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(), c);
      __m256i d[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        d[p] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(start, lo[p], ylo), hi[p], yhi);
      const __m256i sums = sum4_i32(d[0], d[1], d[2], d[3]);
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(b.d)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemm_q4_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>,
                                       group_tokens<4>};
  gemm_x8_groups(kFns, k / kQK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
