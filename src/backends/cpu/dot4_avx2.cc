// Four f32 weight rows against one activation row (decode with F32 weights): the activation loads
// and the loop overhead are shared by four rows, which matters when rows are short (tiny models
// spend most of a dot product's instructions outside the FMAs).
#include <immintrin.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {

void dot4_f32_avx2(int64_t k, const float* w, size_t stride, const float* x, float* out) {
  const float* w0 = w;
  const float* w1 = w + stride;
  const float* w2 = w + 2 * stride;
  const float* w3 = w + 3 * stride;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, a3);
  }
  // The four horizontal sums in one hadd tree: lanes of s are rows 0-3.
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  float s[4];
  _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  for (; i < k; ++i) {
    s[0] += w0[i] * x[i];
    s[1] += w1[i] * x[i];
    s[2] += w2[i] * x[i];
    s[3] += w3[i] * x[i];
  }
  for (int r = 0; r < 4; ++r) out[r] = s[r];
}

}  // namespace nexus::cpu
