// AVX2 Q5_0x8 kernel: the shared kernel (dot_q5_0x8_impl.h) with the fifth bit tested by and +
// cmpeq and OR'ed in as 0x10, and the products on maddubs (unsigned codes 0..31 times signed
// activations, at most 2 * 31 * 128 per int16) then madd with ones.
#include "backends/cpu/dot_q5_0x8_impl.h"

namespace nexus::cpu {
namespace {

struct Avx2Ops {
  static __m256i code(__m256i nib, __m256i high, __m256i bit, __m256i c16) {
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(high, bit), bit);
    return _mm256_or_si256(nib, _mm256_and_si256(set, c16));
  }
  static __m256i dot(__m256i acc, __m256i code, __m256i y) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(code, y), _mm256_set1_epi16(1)));
  }
};

}  // namespace

void gemm_q5_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q5_0x8<Avx2Ops>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
