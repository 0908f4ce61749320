// Scalar reference of the AdamW and clipping loops (see optimizer_kernels.h).
#include "train/optimizer_kernels.h"

#include <cmath>

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
