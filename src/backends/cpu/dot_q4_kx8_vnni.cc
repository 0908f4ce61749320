// AVX512-VNNI Q4_Kx8 kernel: the shared kernel (dot_q4_kx8_impl.h) with its products on vpdpbusd
// (256-bit; the 4-bit codes are already unsigned bytes, the Q8_K activations signed): two
// vpdpbusd give each int32 lane the sum of eight products (at most 8 * 15 * 128 = 15360, inside
// int16), and one vpdpwssd multiplies it by the row's scale, which sits in the low int16 of each
// lane with zero above it, and adds it into the pair sum. Bit-identical to the AVX2 kernel.
#include "backends/cpu/dot_q4_kx8_impl.h"

namespace nexus::cpu {
namespace {

struct VnniPairs {
  // Scale byte j of row p (low lane) and row p + 4 (high lane) as the low int16 of all four int32
  // lanes of its half, zero in the high int16.
  static __m256i scale(__m256i sc, int p, int j) {
    const int b = (4 * p + j) | (0x80 << 8) | (0x80 << 16) | (0x80 << 24);
    return _mm256_shuffle_epi8(sc, _mm256_set1_epi32(b));
  }
  static __m256i step(__m256i acc, __m256i a, __m256i b, __m256i y0, __m256i y1, __m256i s) {
    const __m256i prod =
        _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), a, y0), b, y1);
    return _mm256_dpwssd_epi32(acc, prod, s);
  }
};

}  // namespace

void gemm_q4_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_q4_kx8<VnniPairs>(k, w, n_groups, x, x_stride, n_tokens, y, y_stride);
}

}  // namespace nexus::cpu
