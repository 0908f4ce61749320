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

}  // namespace nexus::cpu
