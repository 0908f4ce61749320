// Four or eight f32 weight rows against one activation row (decode with F32 weights): the
// activation loads and the loop overhead are shared by the rows, which matters when rows are short
// (tiny models spend most of a dot product's instructions outside the FMAs). One accumulator per
// row; eight rows keep eight FMA chains in flight, enough to cover the FMA latency (four chains ran
// at half the FMA rate). Both reduce each accumulator in the same order (an hadd tree, then the
// two 128-bit halves), so a row's result is the same bits whichever pass computed it.
#include <immintrin.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

// s plus the products of elements [i, k) of the row w and x, added in order.
inline float tail(int64_t i, int64_t k, const float* w, const float* x, float s) {
  for (; i < k; ++i) s += w[i] * x[i];
  return s;
}

}  // namespace

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
  for (int r = 0; r < 4; ++r) out[r] = tail(i, k, w + r * stride, x, s[r]);
}

void dot8_f32_avx2(int64_t k, const float* w, size_t stride, const float* x, float* out) {
  const float* w0 = w;
  const float* w4 = w + 4 * stride;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + stride + i), xv, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + 2 * stride + i), xv, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + 3 * stride + i), xv, a3);
    a4 = _mm256_fmadd_ps(_mm256_loadu_ps(w4 + i), xv, a4);
    a5 = _mm256_fmadd_ps(_mm256_loadu_ps(w4 + stride + i), xv, a5);
    a6 = _mm256_fmadd_ps(_mm256_loadu_ps(w4 + 2 * stride + i), xv, a6);
    a7 = _mm256_fmadd_ps(_mm256_loadu_ps(w4 + 3 * stride + i), xv, a7);
  }
  // Lanes of s are rows 0-7, each summed as dot4 sums it (its hadd tree, then the halves).
  const __m256 s = avx2::sum8_ps(a0, a1, a2, a3, a4, a5, a6, a7);
  if (i == k) {
    _mm256_storeu_ps(out, s);
    return;
  }
  float t[8];
  _mm256_storeu_ps(t, s);
  for (int r = 0; r < 8; ++r) out[r] = tail(i, k, w + r * stride, x, t[r]);
}

}  // namespace nexus::cpu
