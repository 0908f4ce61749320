// AVX2 Q8_0x8 kernel: the shared kernel (dot_q8_0x8_impl.h) with the usual sign trick for int8 x
// int8 per pair of rows and token: maddubs(|w|, y with w's sign) (any weight byte, -128 included,
// enters as its magnitude; activations are -127..127 from the quantizer), then madd with ones.
#include "backends/cpu/dot_q8_0x8_impl.h"

namespace nexus::cpu {
namespace {

struct SignPairs {
  struct Column {
    const uint8_t* codes;  // loaded per token: sixteen registers hold no more
  };
  static Column prepare(const uint8_t* codes) { return {codes}; }
  static void sums(const Column& c, __m256i y0, __m256i y1, __m256i s[4]) {
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i v0 = load256(c.codes + 32 * (2 * p));
      const __m256i v1 = load256(c.codes + 32 * (2 * p + 1));
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(y0, v0));
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(v1, v1), _mm256_sign_epi8(y1, v1));
      s[p] = _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
    }
  }
};

}  // namespace

void gemm_q8_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q8_0x8<SignPairs>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
