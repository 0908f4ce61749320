// AVX512-VNNI Q6_Kx8 kernel: the shared kernel (dot_q6_kx8_impl.h) with one vpdpwssd (256-bit) per
// pair-sum update instead of madd + add; bit-identical to the AVX2 kernel. Q06B tg64, alternating
// medians of 3: Q4_0 (Q6_K output head) 75.5 -> 76.7 t/s, Q4_K_M 68.7 -> 70.6.
#include "backends/cpu/dot_q6_kx8_impl.h"

namespace nexus::cpu {
namespace {

struct Dpwssd {
  static __m256i step(__m256i acc, __m256i p, __m256i s) { return _mm256_dpwssd_epi32(acc, p, s); }
};

}  // namespace

void gemm_q6_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  static constexpr X8GroupFn kFns[] = {group_tokens<1, Dpwssd>, group_tokens<2, Dpwssd>,
                                       group_tokens<3, Dpwssd>, group_tokens<4, Dpwssd>};
  gemm_x8_groups(kFns, k / kQKK, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
