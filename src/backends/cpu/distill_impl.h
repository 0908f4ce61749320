// The distillation loss's row kernel (backends/api/loss.h), written once and built twice: with
// portable flags (distill_loss.cc, the reference) and with AVX2/FMA (distill_loss_avx2.cc, where
// the exps are the vectorised ones). Internal linkage, so the two builds never mix.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/api/loss.h"
#include "backends/cpu/parallel.h"
#ifdef __AVX2__
#include "backends/cpu/exp_avx2.h"
#endif

namespace nexus::cpu {
namespace {

// y[i] = exp(x[i] * a - b); returns the sum, in double.
inline double exp_scaled(const float* x, float a, float b, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX2__
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, avx2::exp_clamped(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), va, vb)));
#endif
  for (; i < n; ++i) y[i] = std::exp(x[i] * a - b);
  double z = 0.0;
  for (int64_t j = 0; j < n; ++j) z += y[j];
  return z;
}

float distill_row(float* s, const float* t, int64_t v, int32_t target, float scale, float temp,
                  float alpha, float* work) {
  if (target < 0) {
    std::fill(s, s + v, 0.0f);
    return 0.0f;
  }
  const float inv_t = 1.0f / temp;
  const float ms = *std::max_element(s, s + v), mt = *std::max_element(t, t + v);
  float* p = work;           // softmax(s)
  float* q = work + v;       // softmax(s / T)
  float* r = work + 2 * v;   // softmax(t / T)
  const double zs = exp_scaled(s, 1.0f, ms, p, v);
  const double zq = exp_scaled(s, inv_t, ms * inv_t, q, v);
  const double zt = exp_scaled(t, inv_t, mt * inv_t, r, v);
  const double lzq = std::log(zq), lzt = std::log(zt);
  // KL(r || q) = sum r_j (log r_j - log q_j), log r_j - log q_j = (t_j - s_j) / T - (mt - ms) / T
  // - log zt + log zq.
  const double shift = (double(mt) - ms) * inv_t + lzt - lzq;
  double kl = 0.0;
  for (int64_t j = 0; j < v; ++j)
    if (r[j] > 0.0f) kl += double(r[j]) * ((double(t[j]) - s[j]) * inv_t - shift);
  kl /= zt;
  const double ce = double(ms) + std::log(zs) - s[target];
  const float fp = static_cast<float>(1.0 / zs), fq = static_cast<float>(1.0 / zq),
              fr = static_cast<float>(1.0 / zt);
  const float hard = alpha * scale, soft = (1.0f - alpha) * temp * scale;
  for (int64_t j = 0; j < v; ++j) s[j] = hard * (p[j] * fp) + soft * (q[j] * fq - r[j] * fr);
  s[target] -= hard;
  return static_cast<float>(alpha * ce + (1.0 - alpha) * double(temp) * temp * kl);
}

[[maybe_unused]] void distill_run(const DistillLossArgs& a, ThreadPool* pool) {
  par::for_ranges(pool, a.n, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> work(static_cast<size_t>(3 * a.v));
    for (int64_t i = r0; i < r1; ++i)
      a.row_loss[i] = distill_row(a.logits + i * a.v, a.teacher + i * a.v, a.v, a.targets[i],
                                  a.scale, a.temperature, a.alpha, work.data());
  });
}

}  // namespace
}  // namespace nexus::cpu
