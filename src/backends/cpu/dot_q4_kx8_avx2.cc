// AVX2 Q4_Kx8 kernel: the shared kernel (dot_q4_kx8_impl.h) with maddubs for the products and
// madd for the scales. A lane of the two maddubs sums at most four products 15 * 128 (7680, inside
// int16); madd then multiplies by the scale (at most 63) into int32.
#include "backends/cpu/dot_q4_kx8_impl.h"

namespace nexus::cpu {
namespace {

struct MaddubsPairs {
  // Scale byte j of row p (low lane) and row p + 4 (high lane) in every int16 of its half.
  static __m256i scale(__m256i sc, int p, int j) {
    const int b = (4 * p + j) | (0x80 << 8);
    return _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<short>(b)));
  }
  static __m256i step(__m256i acc, __m256i a, __m256i b, __m256i y0, __m256i y1, __m256i s) {
    const __m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(a, y0), _mm256_maddubs_epi16(b, y1));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(d, s));
  }
};

}  // namespace

void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_kx8<MaddubsPairs>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
