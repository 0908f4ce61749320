// AVX2 rows of LayerNorm and RMSNorm, bit-identical to the scalar ones (norm.cc). par::sum4
// adds term j into partial sum j % 4 and returns (s0 + s1) + (s2 + s3): here the four partial
// sums are the four lanes of one double register, fed four terms at a time in the same order,
// with the tail into lane 0. Every f32 and f64 operation rounds as in the scalar loop: CMake
// compiles this file with -ffp-contract=off, so no multiply and add are fused. GPT-2 124M, one
// step: see docs/TRAINING.md.
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/norm.h"

namespace nexus::cpu {
namespace {

inline __m256d load4d(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }

// par::sum4's ending: the terms j0 .. c-1 added one by one to partial sum 0 (lane 0), then
// (s0 + s1) + (s2 + s3).
template <typename Term>
double finish(__m256d acc, int64_t j0, int64_t c, const Term& term) {
  alignas(32) double s[4];
  _mm256_store_pd(s, acc);
  for (int64_t j = j0; j < c; ++j) s[0] += term(j);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

void layernorm_forward_row_avx2(float* out, float* mean, float* rstd, const float* x,
                                const float* w, const float* b, int64_t c, float eps) {
  const int64_t c4 = c / 4 * 4;
  __m256d acc = _mm256_setzero_pd();
  for (int64_t j = 0; j < c4; j += 4) acc = _mm256_add_pd(acc, load4d(x + j));
  const double m = finish(acc, c4, c, [&](int64_t j) { return static_cast<double>(x[j]); }) / c;
  const __m256d mv = _mm256_set1_pd(m);
  acc = _mm256_setzero_pd();
  for (int64_t j = 0; j < c4; j += 4) {
    const __m256d d = _mm256_sub_pd(load4d(x + j), mv);
    acc = _mm256_add_pd(acc, _mm256_mul_pd(d, d));
  }
  const double var = finish(acc, c4, c, [&](int64_t j) { return (x[j] - m) * (x[j] - m); });
  const double r = 1.0 / std::sqrt(var / c + eps);
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(r);
  const __m256d rv = _mm256_set1_pd(r);
  for (int64_t j = 0; j < c4; j += 4) {
    const __m128 xh = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_sub_pd(load4d(x + j), mv), rv));
    _mm_storeu_ps(out + j, _mm_add_ps(_mm_mul_ps(xh, _mm_loadu_ps(w + j)), _mm_loadu_ps(b + j)));
  }
  for (int64_t j = c4; j < c; ++j) out[j] = static_cast<float>((x[j] - m) * r) * w[j] + b[j];
}

void layernorm_backward_row_avx2(float* dx, float* pw, float* pb, const float* g, const float* x,
                                 const float* w, float m, float r, int64_t c) {
  const int64_t c4 = c / 4 * 4, c8 = c / 8 * 8;
  const __m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(r);
  // sum g w and sum g w xhat, xhat = (x - m) r in f32, the products in f64.
  __m256d a_g = _mm256_setzero_pd(), a_gx = _mm256_setzero_pd();
  for (int64_t j = 0; j < c4; j += 4) {
    const __m128 xh = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + j), _mm256_castps256_ps128(mv)),
                                 _mm256_castps256_ps128(rv));
    const __m256d gw = _mm256_mul_pd(load4d(g + j), load4d(w + j));
    a_g = _mm256_add_pd(a_g, gw);
    a_gx = _mm256_add_pd(a_gx, _mm256_mul_pd(gw, _mm256_cvtps_pd(xh)));
  }
  const double sg = finish(a_g, c4, c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j]; });
  const double sgx = finish(
      a_gx, c4, c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j] * ((x[j] - m) * r); });
  const float mg = static_cast<float>(sg / c), mgx = static_cast<float>(sgx / c);
  const __m256 mgv = _mm256_set1_ps(mg), mgxv = _mm256_set1_ps(mgx);
  for (int64_t j = 0; j < c8; j += 8) {
    const __m256 gj = _mm256_loadu_ps(g + j);
    const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv), rv);
    const __m256 inner = _mm256_sub_ps(
        _mm256_sub_ps(_mm256_mul_ps(gj, _mm256_loadu_ps(w + j)), mgv), _mm256_mul_ps(xhat, mgxv));
    _mm256_storeu_ps(dx + j, _mm256_add_ps(_mm256_loadu_ps(dx + j), _mm256_mul_ps(rv, inner)));
    _mm256_storeu_ps(pw + j, _mm256_add_ps(_mm256_loadu_ps(pw + j), _mm256_mul_ps(gj, xhat)));
    _mm256_storeu_ps(pb + j, _mm256_add_ps(_mm256_loadu_ps(pb + j), gj));
  }
  for (int64_t j = c8; j < c; ++j) {
    const float xhat = (x[j] - m) * r;
    dx[j] += r * (g[j] * w[j] - mg - xhat * mgx);
    pw[j] += g[j] * xhat;
    pb[j] += g[j];
  }
}

void rmsnorm_forward_row_avx2(float* out, float* rstd, const float* x, const float* w, int64_t c,
                              float eps) {
  const int64_t c4 = c / 4 * 4, c8 = c / 8 * 8;
  __m256d acc = _mm256_setzero_pd();
  for (int64_t j = 0; j < c4; j += 4) {
    const __m256d xd = load4d(x + j);
    acc = _mm256_add_pd(acc, _mm256_mul_pd(xd, xd));
  }
  const double ss = finish(acc, c4, c, [&](int64_t j) { return static_cast<double>(x[j]) * x[j]; });
  const float r = static_cast<float>(1.0 / std::sqrt(ss / c + eps));
  *rstd = r;
  const __m256 rv = _mm256_set1_ps(r);
  for (int64_t j = 0; j < c8; j += 8)
    _mm256_storeu_ps(
        out + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), rv), _mm256_loadu_ps(w + j)));
  for (int64_t j = c8; j < c; ++j) out[j] = x[j] * r * w[j];
}

void rmsnorm_backward_row_avx2(float* dx, float* pw, const float* g, const float* x, const float* w,
                               float r, int64_t c) {
  const int64_t c4 = c / 4 * 4, c8 = c / 8 * 8;
  __m256d acc = _mm256_setzero_pd();
  for (int64_t j = 0; j < c4; j += 4)
    acc = _mm256_add_pd(acc,
                        _mm256_mul_pd(_mm256_mul_pd(load4d(g + j), load4d(w + j)), load4d(x + j)));
  const double dot =
      finish(acc, c4, c, [&](int64_t j) { return static_cast<double>(g[j]) * w[j] * x[j]; });
  const float k = static_cast<float>(dot * r * r * r / c);
  const __m256 rv = _mm256_set1_ps(r), kv = _mm256_set1_ps(k);
  for (int64_t j = 0; j < c8; j += 8) {
    const __m256 gj = _mm256_loadu_ps(g + j), xj = _mm256_loadu_ps(x + j);
    const __m256 t = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(rv, _mm256_loadu_ps(w + j)), gj),
                                   _mm256_mul_ps(kv, xj));
    _mm256_storeu_ps(dx + j, _mm256_add_ps(_mm256_loadu_ps(dx + j), t));
    _mm256_storeu_ps(
        pw + j, _mm256_add_ps(_mm256_loadu_ps(pw + j), _mm256_mul_ps(_mm256_mul_ps(gj, xj), rv)));
  }
  for (int64_t j = c8; j < c; ++j) {
    dx[j] += r * w[j] * g[j] - k * x[j];
    pw[j] += g[j] * x[j] * r;
  }
}

}  // namespace nexus::cpu
