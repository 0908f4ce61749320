// AVX512-VNNI Q4_0x8 kernel: the shared kernel (dot_q4_0x8_impl.h) with its products on vpdpbusd
// (256-bit): the codes 0..15 are unsigned bytes, the activations signed, and each vpdpbusd adds
// four products into its row's int32 lane. The sums start from -8 * sum(y), which takes Q4_0's
// offset out, and run as two chains of four (the low and the high nibbles) so that no chain waits
// eight latencies. Bit-identical to the AVX2 kernel.
#include "backends/cpu/dot_q4_0x8_impl.h"
#include "backends/cpu/vnni_local.h"

namespace nexus::cpu {
namespace {

struct VnniSums {
  static __m256i block(const __m256i lo[4], const __m256i hi[4], const int8_t* y, int32_t s8) {
    __m256i a = _mm256_set1_epi32(-s8), b = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      a = dpbusd_bcast(a, lo[j], y + 4 * j);
      b = dpbusd_bcast(b, hi[j], y + 16 + 4 * j);
    }
    return _mm256_add_epi32(a, b);
  }
};

}  // namespace

void gemm_q4_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_0x8<VnniSums>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
