// AVX2 Q4_Kx8 kernel: the shared kernel (dot_q4_kx8_impl.h) with maddubs for the products and madd
// for the scales and mins. Each int16 of a maddubs sums two products 15 * 128, four maddubs added
// in int16 at most 15360; madd then multiplies both int16 of a lane by the row's scale (at most
// 63) into int32.
#include "backends/cpu/dot_q4_kx8_impl.h"

namespace nexus::cpu {
namespace {

struct MaddubsSums {
  static constexpr bool kBothHalves = true;
  static __m256i half(__m256i acc, const __m256i q[4], const int8_t* y, __m256i s) {
    const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], broadcast4(y)),
                                       _mm256_maddubs_epi16(q[1], broadcast4(y + 4)));
    const __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(q[2], broadcast4(y + 8)),
                                       _mm256_maddubs_epi16(q[3], broadcast4(y + 12)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(a, b), s));
  }
  static __m256i mins(__m256i acc, __m256i m, const int16_t* bs) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(m, broadcast4(bs)));
  }
};

}  // namespace

void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_kx8<MaddubsSums>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
