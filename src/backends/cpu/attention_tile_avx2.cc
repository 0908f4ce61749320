// AVX2/FMA online-softmax tile step: dot products 8 lanes at a time, exp of the scores with a
// vectorised polynomial (range reduction by ln 2, degree-5 minimax-style polynomial, relative
// error ~2e-7, well inside the 1e-5 attention parity bound), weighted value sums with FMA.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/attention_tile.h"
#include "backends/cpu/exp_avx2.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
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
    const __m256 w = avx2::exp_neg(_mm256_sub_ps(_mm256_loadu_ps(t.scores + j), mv));
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

float attn_row_softmax_avx2(float* s, int32_t cnt, float* max, float* sum) {
  __m256 mv = _mm256_set1_ps(*max);
  int32_t j = 0;
  for (; j + 8 <= cnt; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + j));
  float m = hmax(mv);
  for (; j < cnt; ++j) m = std::max(m, s[j]);
  const float corr = std::exp(*max - m);
  mv = _mm256_set1_ps(m);
  __m256 addv = _mm256_setzero_ps();
  for (j = 0; j + 8 <= cnt; j += 8) {
    const __m256 w = avx2::exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, w);
    addv = _mm256_add_ps(addv, w);
  }
  float add = avx2::hsum(addv);
  for (; j < cnt; ++j) add += (s[j] = std::exp(s[j] - m));
  *sum = *sum * corr + add;
  *max = m;
  return corr;
}

}  // namespace nexus::cpu
