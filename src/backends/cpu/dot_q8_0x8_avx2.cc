// AVX2 kernel over the Q8_0x8 layout (repack.h): eight weight rows x 1-4 tokens per pass. Per
// 32-element block column (272 bytes, eight rows):
//   - eight 32-byte code loads, each the same 16 elements of rows p and p + 4;
//   - the usual sign trick for int8 x int8: maddubs(|w|, y with w's sign) (any weight byte, -128
//     included, enters as its magnitude; activations are -127..127 from the quantizer), then
//     madd with ones: one int32 vector per pair of rows;
//   - three hadds leave the eight exact block sums one row per lane, then one conversion and one
//     FMA with the eight d (one 16-byte load and vcvtph2ps) times d_y.
// The file-layout kernel pays a scale conversion, a multiply and an FMA per row and block, and
// one horizontal sum per row; here they are shared by eight rows. gemm_q8_0x8_ref performs the
// same exact sums and the same FMA: bit-identical.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ8_0);  // 272
constexpr size_t kPrefetchAhead = 2048;

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, float* out,
                  int64_t out_stride) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = w + static_cast<size_t>(i) * kColumnBytes;
    const char* pf = reinterpret_cast<const char*>(col + kPrefetchAhead);
    for (size_t o = 0; o < kColumnBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride)[i];
      const __m256i y0 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      const __m256i y1 =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      __m256i s[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        const __m256i v0 = load256(col + 16 + 32 * (2 * p));
        const __m256i v1 = load256(col + 16 + 32 * (2 * p + 1));
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(y0, v0));
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(v1, v1), _mm256_sign_epi8(y1, v1));
        s[p] = _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
      }
      const __m256i rows = avx2::sum4_i32(s[0], s[1], s[2], s[3]);
      const __m256 dy = _mm256_set1_ps(avx2::h2f(b.d));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), _mm256_mul_ps(dw, dy), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemm_q8_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>,
                                       group_tokens<4>};
  gemm_x8_groups(kFns, k / kQK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
