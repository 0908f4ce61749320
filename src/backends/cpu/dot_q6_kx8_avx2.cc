// AVX2 Q6_Kx8 kernel: the shared kernel (dot_q6_kx8_impl.h) with madd + add for the pair sums.
#include "backends/cpu/dot_q6_kx8_impl.h"

namespace nexus::cpu {
namespace {

struct MaddAdd {
  static __m256i step(__m256i acc, __m256i p, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
  }
};

}  // namespace

void gemm_q6_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, MaddAdd>, group_tokens<2, MaddAdd>,
                                       group_tokens<3, MaddAdd>, group_tokens<4, MaddAdd>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
