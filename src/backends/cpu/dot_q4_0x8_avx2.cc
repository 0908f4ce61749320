// AVX2 Q4_0x8 kernel: the shared kernel (dot_q4_0x8_impl.h) with its products on maddubs. Each
// of a block's eight maddubs gives every 16-bit lane two products q * y (|.| <= 2 * 15 * 128);
// the eight are added in int16 (|sum| <= 30720, inside int16), and one madd with ones leaves the
// row's block sum in its 32-bit lane; 8 * sum(y) comes off with one subtraction.
#include "backends/cpu/dot_q4_0x8_impl.h"

namespace nexus::cpu {
namespace {

struct Avx2Sums {
  static __m256i block(const __m256i lo[4], const __m256i hi[4], const int8_t* y, int32_t s8) {
    __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[j], broadcast4(y + 4 * j)));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[j], broadcast4(y + 16 + 4 * j)));
    }
    return _mm256_sub_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_set1_epi32(s8));
  }
};

}  // namespace

void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_0x8<Avx2Sums>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
