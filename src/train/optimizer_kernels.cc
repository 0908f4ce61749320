// Scalar reference of the AdamW and clipping loops (see optimizer_kernels.h).
#include "train/optimizer_kernels.h"

#include <cmath>
#include <cstring>

#include "nexus/dtype.h"

namespace nexus::train::kernels {

void adamw_scalar(float* p, const float* g, float* m, float* v, size_t n, const AdamWCoef& k) {
  const float a1 = 1.0f - k.b1, a2 = 1.0f - k.b2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.gscale;
    const float mi = k.b1 * m[i] + a1 * gi;
    const float vi = k.b2 * v[i] + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) * k.inv_bc2_sqrt + k.eps);
  }
}

namespace {
uint16_t round_stochastic(float f, uint32_t r16) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return static_cast<uint16_t>((b + r16) >> 16);
}
}  // namespace

void adamw_bf16_scalar(float* p, const float* g, uint16_t* m, uint16_t* v, size_t n,
                       uint32_t index0, uint32_t seed, const AdamWCoef& k) {
  const float a1 = 1.0f - k.b1, a2 = 1.0f - k.b2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.gscale;
    const float mi = k.b1 * bf16_to_f32(m[i]) + a1 * gi;
    const float vi = k.b2 * bf16_to_f32(v[i]) + a2 * gi * gi;
    const uint32_t r = mix32(index0 + static_cast<uint32_t>(i) + seed);
    m[i] = round_stochastic(mi, r & 0xffffu);
    v[i] = round_stochastic(vi, r >> 16);
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) * k.inv_bc2_sqrt + k.eps);
  }
}

double sumsq_scalar(const float* g, size_t n) {
  double a[kSumLanes] = {};
  for (size_t i = 0; i < n; ++i) {
    const double x = g[i];
    a[i % kSumLanes] += x * x;
  }
  return fold_lanes(a);
}

void scale_scalar(float* g, size_t n, float c) {
  for (size_t i = 0; i < n; ++i) g[i] *= c;
}

}  // namespace nexus::train::kernels
