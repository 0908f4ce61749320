// AVX512-VNNI Q5_0x8 kernel: the shared kernel (dot_q5_0x8_impl.h) with the fifth bit tested into a
// mask register (vptestmb) and added as 0x10 under it, and the products on vpdpbusd (256-bit;
// unsigned codes times signed activations, four per int32 lane). The same exact integers as the
// AVX2 kernel: bit-identical.
#include "backends/cpu/dot_q5_0x8_impl.h"

namespace nexus::cpu {
namespace {

struct VnniOps {
  static __m256i code(__m256i nib, __m256i high, __m256i bit, __m256i c16) {
    return _mm256_mask_add_epi8(nib, _mm256_test_epi8_mask(high, bit), nib, c16);
  }
  static __m256i dot(__m256i acc, __m256i code, __m256i y) {
    return _mm256_dpbusd_epi32(acc, code, y);
  }
};

}  // namespace

void gemm_q5_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q5_0x8<VnniOps>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
