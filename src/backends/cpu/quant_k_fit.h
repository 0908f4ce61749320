// The scale fitters the K-quant quantizers share (quant_k_ref.cc: Q4_K, Q5_K, Q6_K;
// quant_k23_ref.cc: Q2_K, Q3_K), and the importance-weighted 32-blocks (quant_imp.cc). Internal
// linkage: include only from those files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cpu/blocks.h"

namespace nexus::cpu {
namespace {

// Round to nearest, ties to even (what the AVX2 rounding instruction does), for |f| < 2^22.
inline int nearest_int(float f) {
  const float v = f + 12582912.0f;  // 1.5 * 2^23: pushes the integer part into the mantissa
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Importance of each value when fitting a scale: magnitude plus the block's RMS, so large values
// are kept accurate without ignoring the small ones. With an importance matrix's values for the
// block's columns (qw, the mean squared activation each weight meets), the error that counts is
// the one the activations see: qw times the weight's magnitude (with the block's mean square, so
// that no value's weight falls to zero).
inline void fit_weights(const float* x, int n, float* w, const float* qw = nullptr) {
  float sum_x2 = 0.0f;
  for (int i = 0; i < n; ++i) sum_x2 += x[i] * x[i];
  if (qw != nullptr) {
    const float mean_x2 = sum_x2 / static_cast<float>(n);
    for (int i = 0; i < n; ++i) w[i] = qw[i] * std::sqrt(mean_x2 + x[i] * x[i]);
    return;
  }
  const float rms = std::sqrt(sum_x2 / static_cast<float>(n));
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

// Fits x ~ scale * L - offset with L in [0, nmax] and offset >= 0 (the K-quant min is subtracted).
// Tries a grid of candidate step sizes around (max - min) / nmax; for each, rounds to codes and
// solves the weighted 2-parameter least squares for (scale, offset); keeps the lowest error.
// Returns the scale, writes the offset and the codes.
inline float fit_scale_min(const float* x, const float* w, int n, int nmax, uint8_t* L,
                           float* offset) {
  float lo = x[0], hi = x[0];
  float sw = 0.0f, swx = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *offset = -lo;
    return 0.0f;
  }
  float best_scale = (hi - lo) / static_cast<float>(nmax);
  float best_min = lo;
  float best_err = -1.0f;
  uint8_t cand[kQKK];
  constexpr int kSteps = 24;
  for (int step = -1; step <= kSteps; ++step) {
    // step -1 is the plain min/max grid; the others sweep nmax-1 ... nmax+1.3.
    const float levels = step < 0 ? nmax : nmax - 1.0f + 0.1f * step;
    const float iscale = levels / (hi - lo);
    float sl = 0.0f, sll = 0.0f, slx = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      cand[i] = static_cast<uint8_t>(l);
      sl += w[i] * l;
      sll += w[i] * l * l;
      slx += w[i] * l * x[i];
    }
    const float det = sw * sll - sl * sl;
    if (det <= 0.0f) continue;
    float scale = (sw * slx - swx * sl) / det;
    float mn = (sll * swx - sl * slx) / det;
    if (mn > 0.0f) {  // the offset can only lower values: refit with it pinned at zero
      mn = 0.0f;
      scale = slx / sll;
    }
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * cand[i] + mn - x[i];
      err += w[i] * diff * diff;
    }
    if (best_err < 0.0f || err < best_err) {
      best_err = err;
      best_scale = scale;
      best_min = mn;
      std::copy(cand, cand + n, L);
    }
  }
  *offset = -best_min;
  return best_scale;
}

// Fits x ~ scale * L with L in [-nmax, nmax - 1] (symmetric codes for Q6_K). Sweeps the step size
// around the one that maps the largest-magnitude value onto -nmax and keeps the least-squares best.
inline float fit_scale_symmetric(const float* x, const float* w, int n, int nmax, int8_t* L) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-30f) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  float best_scale = 0.0f, best_gain = -1.0f;
  int8_t cand[kQKK];
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(nmax + 0.1f * step) / max;
    float slx = 0.0f, sll = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      cand[i] = static_cast<int8_t>(l);
      slx += w[i] * x[i] * l;
      sll += w[i] * l * l;
    }
    // With the optimal scale slx/sll the weighted error is sum(w x^2) - slx^2/sll: maximise the
    // gain.
    if (sll <= 0.0f) continue;
    const float gain = slx * slx / sll;
    if (gain > best_gain) {
      best_gain = gain;
      best_scale = slx / sll;
      std::copy(cand, cand + n, L);
    }
  }
  return best_scale;
}

// The codes of a super-block's sub-block scales (or mins), v[j] >= 0 for j < n, as d * L[j] with
// L in [0, nmax], d chosen by weighted least squares: sw[j] is the sub-block's total importance, so
// the scale of a sub-block whose activations matter is rounded most accurately (the absmax rule
// d = max / nmax spends the codes on the largest scale alone). Sweeps the step around max / nmax;
// returns d (0 when every v is 0) and writes L.
inline float fit_scale_codes(const float* v, const float* sw, int n, int nmax, uint8_t* L) {
  float max = 0.0f;
  for (int j = 0; j < n; ++j) max = std::max(max, v[j]);
  if (!(max > 0.0f)) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  float best_d = max / static_cast<float>(nmax), best_err = -1.0f;
  uint8_t cand[16];
  for (int step = -6; step <= 6; ++step) {
    const float iscale = (static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    float slv = 0.0f, sll = 0.0f;
    for (int j = 0; j < n; ++j) {
      const int l = std::clamp(nearest_int(iscale * v[j]), 0, nmax);
      cand[j] = static_cast<uint8_t>(l);
      slv += sw[j] * static_cast<float>(l) * v[j];
      sll += sw[j] * static_cast<float>(l * l);
    }
    if (sll <= 0.0f) continue;
    const float d = slv / sll;
    float err = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float diff = v[j] - d * static_cast<float>(cand[j]);
      err += sw[j] * diff * diff;
    }
    if (best_err < 0.0f || err < best_err) {
      best_err = err;
      best_d = d;
      std::copy(cand, cand + n, L);
    }
  }
  if (best_err < 0.0f)
    for (int j = 0; j < n; ++j)
      L[j] = static_cast<uint8_t>(std::clamp(nearest_int(v[j] / best_d), 0, nmax));
  return best_d;
}

// Fits the 16 sub-blocks of 16 of a super-block symmetrically (codes -nmax .. nmax - 1, Q6_K and
// Q3_K): sc[j] and codes L; returns the scale of largest magnitude, with its sign (0 if none).
inline float fit_sub_blocks_symmetric(const float* x, int nmax, float* sc, int8_t* L,
                                      const float* qw = nullptr) {
  float w[16];
  float max_sc = 0.0f, amax_sc = 0.0f;
  for (int j = 0; j < 16; ++j) {
    fit_weights(x + 16 * j, 16, w, qw ? qw + 16 * j : nullptr);
    sc[j] = fit_scale_symmetric(x + 16 * j, w, 16, nmax, L + 16 * j);
    if (std::fabs(sc[j]) > amax_sc) {
      amax_sc = std::fabs(sc[j]);
      max_sc = sc[j];
    }
  }
  return max_sc;
}

}  // namespace
}  // namespace nexus::cpu
