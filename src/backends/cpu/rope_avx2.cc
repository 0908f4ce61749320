// AVX2 row of the adjacent-pair RoPE rotation, bit-identical to the scalar one (rope.cc): every f32
// operation rounds as in the scalar loop (CMake compiles this file with -ffp-contract=off).
#include <immintrin.h>

#include "backends/cpu/rope.h"

namespace nexus::cpu {

// Adjacent pairs (x0, x1) = (v[2i], v[2i+1]) with cs = (cos, sin) per pair: four pairs a vector.
// Even lanes x0 co - x1 si, odd lanes x1 co + x0 si (= x0 si + x1 co: addition commutes).
void rope_rotate_row_avx2(float* v, const float* cs, int64_t half, float sign) {
  const int64_t h4 = half / 4 * 4;
  const __m256 sv = _mm256_set1_ps(sign);
  for (int64_t i = 0; i < h4; i += 4) {
    const __m256 x = _mm256_loadu_ps(v + 2 * i), c = _mm256_loadu_ps(cs + 2 * i);
    const __m256 co = _mm256_moveldup_ps(c), si = _mm256_mul_ps(_mm256_movehdup_ps(c), sv);
    const __m256 swapped = _mm256_permute_ps(x, 0xB1);  // x1, x0 in each pair
    _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(x, co), _mm256_mul_ps(swapped, si)));
  }
  for (int64_t i = h4; i < half; ++i) {
    const float x0 = v[2 * i], x1 = v[2 * i + 1], co = cs[2 * i], si = sign * cs[2 * i + 1];
    v[2 * i] = x0 * co - x1 * si;
    v[2 * i + 1] = x0 * si + x1 * co;
  }
}

}  // namespace nexus::cpu
