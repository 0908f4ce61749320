// What Titans' memories share (titans.cc: the linear memory, titans_mlp.cc: the deep one): unit
// queries and keys, the backward of the momentum and forgetting step, the rate gradients' sums.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/api/memory.h"

namespace nexus::cpu {

// The associative loss's gradient factor for a segment of `len` keys: 2 from the square, 1/len
// from the mean over the keys (with unit keys a linear memory's loss then curves by at most 2, so
// a step theta < 1 cannot blow the memory up, whatever the segment's length).
inline float titans_grad_scale(int64_t len) { return 2.0f / static_cast<float>(len); }

// The deep memory's soft gradient clamp (backends/api/memory.h): for the joint norm n of the
// gradients, the factor k = tau tanh(n / tau) / n they are scaled by and dk = d(n k)/dn - k.
struct GradClamp {
  float n, k, dk;
  explicit GradClamp(double sq) : n(static_cast<float>(std::sqrt(sq))) {
    const float tau = kTitansGradClamp, th = std::tanh(n / tau);
    k = n > 0 ? tau * th / n : 1.0f;
    dk = (1.0f - th * th) - k;
  }
};

// x^ = x / n, n = sqrt(|x|^2 + eps); returns n.
inline float unit(const float* x, int64_t d, float* out) {
  float s = kTitansEps;
  for (int64_t i = 0; i < d; ++i) s += x[i] * x[i];
  const float n = std::sqrt(s);
  for (int64_t i = 0; i < d; ++i) out[i] = x[i] / n;
  return n;
}

// dx from dx^ for x^ = x / n: (dx^ - x^ (x^ . dx^)) / n.
inline void unit_backward(const float* xh, float n, const float* dxh, int64_t d, float* dx) {
  float dot = 0;
  for (int64_t i = 0; i < d; ++i) dot += xh[i] * dxh[i];
  for (int64_t i = 0; i < d; ++i) dx[i] = (dxh[i] - xh[i] * dot) / n;
}

// Back through S_new = eta S - theta G and M_new = (1 - alpha) M + S_new, element by element,
// with G = g_scale * grad: from dm (d/dM_new) and ds (d/dS_new, replaced by d/dS), writes dmo
// (the update's part of d/dM) and dg = g_scale * d/dG, and adds d eta, d theta, d alpha to part.
inline void step_backward(const float* m, const float* sm, const float* grad, float g_scale,
                          float eta, float theta, float alpha, int64_t n, const float* dm,
                          float* ds, float* dmo, float* dg, double* part) {
  double deta = 0, dtheta = 0, dalpha = 0;
  for (int64_t e = 0; e < n; ++e) {
    const float dst = ds[e] + dm[e];
    dalpha -= static_cast<double>(dm[e]) * m[e];
    dmo[e] = (1.0f - alpha) * dm[e];
    deta += static_cast<double>(dst) * sm[e];
    dtheta -= static_cast<double>(dst) * (g_scale * grad[e]);
    ds[e] = eta * dst;
    dg[e] = -g_scale * theta * dst;
  }
  part[0] += deta;
  part[1] += dtheta;
  part[2] += dalpha;
}

// Unit rows of heads [h0, h1) of rows i0..i1 of x into out [len * (h1 - h0)][d] (token-major),
// their norms into n.
inline void unit_rows(const float* x, int64_t ld, int64_t i0, int64_t i1, int64_t h0, int64_t h1,
                      int64_t d, float* out, float* n) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t r = (i - i0) * (h1 - h0) + (h - h0);
      n[r] = unit(x + i * ld + h * d, d, out + r * d);
    }
}

// Each (sequence, head)'s rate gradients (d eta, d theta, d alpha: `parts`, [b][kv][3]) added to
// deta, dtheta, dalpha [kv] in sequence order, so the sums do not depend on the threads.
inline void add_rate_grads(const std::vector<double>& parts, int64_t b, int64_t kv, float* deta,
                           float* dtheta, float* dalpha) {
  for (int64_t s = 0; s < b; ++s)
    for (int64_t g = 0; g < kv; ++g) {
      const double* part = parts.data() + (s * kv + g) * 3;
      deta[g] += static_cast<float>(part[0]);
      dtheta[g] += static_cast<float>(part[1]);
      dalpha[g] += static_cast<float>(part[2]);
    }
}

}  // namespace nexus::cpu
