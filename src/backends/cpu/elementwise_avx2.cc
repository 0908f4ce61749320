// AVX2 SwiGLU: the sigmoid from one vectorised exp of -|x| (never overflows):
// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with e = exp(-|x|).
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/exp_avx2.h"

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
