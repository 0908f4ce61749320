// AVX512-VNNI Q4_Kx8 kernel: the shared kernel (dot_q4_kx8_impl.h) with its products on vpdpbusd
// (256-bit; the 4-bit codes are already unsigned bytes, the Q8_K activations signed): a chain of
// four vpdpbusd gives each row's int32 lane the sum of its 16 products of a half sub-block (at most
// 16 * 15 * 128 = 30720, inside int16), and one vpdpwssd multiplies it by the row's scale, which
// sits in the low int16 of each lane with zero above it, and adds it into S. The mins take one
// vpdpwssd each against the broadcast pair bsums[2j], bsums[2j + 1]. Bit-identical to the AVX2
// kernel.
#include "backends/cpu/dot_q4_kx8_impl.h"
#include "backends/cpu/vnni_local.h"

namespace nexus::cpu {
namespace {

struct VnniSums {
  static constexpr bool kBothHalves = false;
  static __m256i half(__m256i acc, const __m256i q[4], const int8_t* y, __m256i s) {
    __m256i p = dpbusd_bcast(_mm256_setzero_si256(), q[0], y);
#pragma GCC unroll 3
    for (int v = 1; v < 4; ++v) p = dpbusd_bcast(p, q[v], y + 4 * v);
    return _mm256_dpwssd_epi32(acc, p, s);
  }
  static __m256i mins(__m256i acc, __m256i m, const int16_t* bs) {
    return dpwssd_bcast(acc, m, bs);
  }
};

}  // namespace

void gemm_q4_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_kx8<VnniSums>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
