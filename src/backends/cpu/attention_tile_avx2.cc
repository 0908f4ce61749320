// AVX2/FMA online-softmax tile step: dot products 8 lanes at a time, exp of the scores with a
// vectorised polynomial (range reduction by ln 2, degree-5 minimax-style polynomial, relative
// error ~2e-7, well inside the 1e-5 attention parity bound), weighted value sums with FMA.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/attention_tile.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

// exp(x) for x <= 0 (scores minus their max); inputs below -87 flush to 0.
inline __m256 exp_neg_avx2(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 valid = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_max_ps(x, lo);
  // x = n ln2 + r, |r| <= ln2 / 2
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Taylor/Cephes coefficients of expf on [-ln2/2, ln2/2].
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // Scale by 2^n through the exponent bits.
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), valid);
}

inline float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = avx2::hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void attn_tile_avx2(const AttnTile& t) {
  float tile_max = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < t.cnt; ++j) {
    t.scores[j] = dot_avx2(t.q, t.k + j * t.stride, t.hd) * t.scale;
    tile_max = std::max(tile_max, t.scores[j]);
  }
  const float m_new = std::max(*t.max, tile_max);
  const float corr = std::exp(*t.max - m_new);
  const __m256 mv = _mm256_set1_ps(m_new);
  __m256 addv = _mm256_setzero_ps();
  int32_t j = 0;
  for (; j + 8 <= t.cnt; j += 8) {
    const __m256 w = exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(t.scores + j), mv));
    _mm256_storeu_ps(t.scores + j, w);
    addv = _mm256_add_ps(addv, w);
  }
  float add = avx2::hsum(addv);
  for (; j < t.cnt; ++j) {
    t.scores[j] = std::exp(t.scores[j] - m_new);
    add += t.scores[j];
  }
  int64_t e = 0;
  for (; e + 8 <= t.hd; e += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(t.acc + e), _mm256_set1_ps(corr));
    for (int32_t jj = 0; jj < t.cnt; ++jj)
      a = _mm256_fmadd_ps(_mm256_set1_ps(t.scores[jj]), _mm256_loadu_ps(t.v + jj * t.stride + e), a);
    _mm256_storeu_ps(t.acc + e, a);
  }
  for (; e < t.hd; ++e) {
    float a = t.acc[e] * corr;
    for (int32_t jj = 0; jj < t.cnt; ++jj) a += t.scores[jj] * t.v[jj * t.stride + e];
    t.acc[e] = a;
  }
  *t.sum = *t.sum * corr + add;
  *t.max = m_new;
}

}  // namespace nexus::cpu
