// AVX2 versions of the AdamW and clipping loops, bit-identical to optim.cc: the same
// operations in the same order, compiled with -ffp-contract=off (CMakeLists.txt) so that no
// multiply-add is fused; IEEE sqrt and division are correctly rounded in both.
#include <immintrin.h>

#include "backends/cpu/bf16_avx2.h"
#include "backends/cpu/optim.h"

namespace nexus::cpu::optim {

using cpu::bf16x8_to_f32;
using cpu::high_halves;

void adamw_avx2(float* p, const float* g, float* m, float* v, size_t n, const AdamWCoef& k) {
  const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2);
  const __m256 a1 = _mm256_set1_ps(1.0f - k.b1), a2 = _mm256_set1_ps(1.0f - k.b2);
  const __m256 keep = _mm256_set1_ps(k.keep), s = _mm256_set1_ps(k.step_size);
  const __m256 c = _mm256_set1_ps(k.inv_bc2_sqrt), eps = _mm256_set1_ps(k.eps);
  const __m256 gs = _mm256_set1_ps(k.gscale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(a1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                    _mm256_mul_ps(_mm256_mul_ps(a2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), c), eps);
    const __m256 pi = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), keep),
                                    _mm256_div_ps(_mm256_mul_ps(s, mi), den));
    _mm256_storeu_ps(p + i, pi);
  }
  if (i < n) adamw_scalar(p + i, g + i, m + i, v + i, n - i, k);
}

namespace {
__m256i mix32_avx2(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}
// (bits + r16) >> 16 per lane, stored as eight u16 in order.
void store_stochastic8(uint16_t* out, __m256 f, __m256i r16) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   high_halves(_mm256_add_epi32(_mm256_castps_si256(f), r16)));
}
}  // namespace

void adamw_bf16_avx2(float* p, const float* g, uint16_t* m, uint16_t* v, size_t n, uint32_t index0,
                     uint32_t seed, const AdamWCoef& k) {
  const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2);
  const __m256 a1 = _mm256_set1_ps(1.0f - k.b1), a2 = _mm256_set1_ps(1.0f - k.b2);
  const __m256 keep = _mm256_set1_ps(k.keep), s = _mm256_set1_ps(k.step_size);
  const __m256 c = _mm256_set1_ps(k.inv_bc2_sqrt), eps = _mm256_set1_ps(k.eps);
  const __m256 gs = _mm256_set1_ps(k.gscale);
  const __m256i low = _mm256_set1_epi32(0xffff);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, bf16x8_to_f32(m + i)), _mm256_mul_ps(a1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, bf16x8_to_f32(v + i)),
                                    _mm256_mul_ps(_mm256_mul_ps(a2, gi), gi));
    const uint32_t base = index0 + static_cast<uint32_t>(i) + seed;
    const __m256i r = mix32_avx2(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)), iota));
    store_stochastic8(m + i, mi, _mm256_and_si256(r, low));
    store_stochastic8(v + i, vi, _mm256_srli_epi32(r, 16));
    const __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), c), eps);
    const __m256 pi = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), keep),
                                    _mm256_div_ps(_mm256_mul_ps(s, mi), den));
    _mm256_storeu_ps(p + i, pi);
  }
  if (i < n)
    adamw_bf16_scalar(p + i, g + i, m + i, v + i, n - i, index0 + static_cast<uint32_t>(i), seed,
                      k);
}

double sumsq_avx2(const float* g, size_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};  // lanes 0-3, 4-7, 8-11, 12-15
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int h = 0; h < 2; ++h) {
      const __m256 x = _mm256_loadu_ps(g + i + 8 * h);
      const __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
      const __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
      acc[2 * h] = _mm256_add_pd(acc[2 * h], _mm256_mul_pd(xl, xl));
      acc[2 * h + 1] = _mm256_add_pd(acc[2 * h + 1], _mm256_mul_pd(xh, xh));
    }
  }
  alignas(32) double a[kSumLanes];
  for (int k = 0; k < 4; ++k) _mm256_store_pd(a + 4 * k, acc[k]);
  for (size_t j = 0; i < n; ++i, ++j) {
    const double x = g[i];
    a[j] += x * x;
  }
  return fold_lanes(a);
}

void scale_avx2(float* g, size_t n, float c) {
  const __m256 cv = _mm256_set1_ps(c);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), cv));
  for (; i < n; ++i) g[i] *= c;
}

}  // namespace nexus::cpu::optim
