// AVX2 SwiGLU: the sigmoid from one vectorised exp of -|x| (never overflows):
// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with e = exp(-|x|). AVX2 RMSNorm
// (the sum of squares in double) and the sampler's copy with block maxima.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/exp_avx2.h"
#include "backends/cpu/elementwise.h"

namespace nexus::cpu {

void swiglu_avx2(float* g, const float* u, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = avx2::exp_neg(_mm256_or_ps(x, sign));  // exp(-|x|)
    const __m256 num = _mm256_blendv_ps(one, e, x);          // sign bit of x picks e
    const __m256 sig = _mm256_div_ps(num, _mm256_add_ps(one, e));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_mul_ps(x, sig), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

bool copy_block_max_avx2(const float* src, float* dst, int64_t n, float* block_max) {
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  int64_t b = 0;
  for (; (b + 1) * kBlockMaxEntries <= n; ++b) {
    const float* s = src + b * kBlockMaxEntries;
    float* d = dst == nullptr ? nullptr : dst + b * kBlockMaxEntries;
    __m256 m[2];
    for (int h = 0; h < 2; ++h) {
      // Four vectors of each half: their max, their copy, and x < inf (false for NaN and +inf).
      const __m256 x0 = _mm256_loadu_ps(s + 32 * h), x1 = _mm256_loadu_ps(s + 32 * h + 8);
      const __m256 x2 = _mm256_loadu_ps(s + 32 * h + 16), x3 = _mm256_loadu_ps(s + 32 * h + 24);
      if (dst != nullptr) {
        _mm256_storeu_ps(d + 32 * h, x0);
        _mm256_storeu_ps(d + 32 * h + 8, x1);
        _mm256_storeu_ps(d + 32 * h + 16, x2);
        _mm256_storeu_ps(d + 32 * h + 24, x3);
      }
      const __m256 lt = _mm256_and_ps(
          _mm256_and_ps(_mm256_cmp_ps(x0, inf, _CMP_LT_OQ), _mm256_cmp_ps(x1, inf, _CMP_LT_OQ)),
          _mm256_and_ps(_mm256_cmp_ps(x2, inf, _CMP_LT_OQ), _mm256_cmp_ps(x3, inf, _CMP_LT_OQ)));
      ok = _mm256_and_ps(ok, lt);
      m[h] = _mm256_max_ps(_mm256_max_ps(x0, x1), _mm256_max_ps(x2, x3));
    }
    // Max of the eight lanes (exact in any order: no NaN gets here unflagged, and a -0 / +0 tie
    // only decides which zero stands for the block, which compares equal either way).
    __m128 v = _mm_max_ps(_mm256_castps256_ps128(_mm256_max_ps(m[0], m[1])),
                          _mm256_extractf128_ps(_mm256_max_ps(m[0], m[1]), 1));
    v = _mm_max_ps(v, _mm_movehl_ps(v, v));
    v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
    block_max[b] = _mm_cvtss_f32(v);
  }
  bool all = _mm256_movemask_ps(ok) == 0xff;
  if (b * kBlockMaxEntries < n)
    all &= copy_block_max_scalar(src + b * kBlockMaxEntries,
                                 dst == nullptr ? nullptr : dst + b * kBlockMaxEntries,
                                 n - b * kBlockMaxEntries, block_max + b);
  return all;
}

void rms_norm_avx2(const float* x, const float* w, float eps, float* y, int64_t rows,
                   int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256 v = _mm256_loadu_ps(xr + i);
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      a0 = _mm256_fmadd_pd(lo, lo, a0);  // exact: a float's square fits a double
      a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    alignas(32) double part[4];
    _mm256_store_pd(part, _mm256_add_pd(a0, a1));
    double ss = (part[0] + part[1]) + (part[2] + part[3]);
    for (; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
    const __m256 sv = _mm256_set1_ps(scale);
    i = 0;
    if (w) {
      for (; i + 8 <= dim; i += 8)
        _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), sv),
                                               _mm256_loadu_ps(w + i)));
      for (; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
    } else {
      for (; i + 8 <= dim; i += 8) _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_loadu_ps(xr + i), sv));
      for (; i < dim; ++i) yr[i] = xr[i] * scale;
    }
  }
}

}  // namespace nexus::cpu
