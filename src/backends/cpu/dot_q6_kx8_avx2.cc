// AVX2 Q6_Kx8 kernel: the 256-bit kernel of dot_q6_kx8_impl.h (madd + add for the pair sums).
#include "backends/cpu/dot_q6_kx8_impl.h"

namespace nexus::cpu {

void gemm_q6_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>,
                                       group_tokens<4>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
