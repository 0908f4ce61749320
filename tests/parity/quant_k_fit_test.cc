// The K-quants' scale-of-scales fit (quant_k_fit.h, fit_scale_codes): its weighted error is never
// above the absmax rule's (d = max / nmax), it is lower on most random super-blocks, and it gives
// exact codes for scales that are multiples of one step.
#include "backends/cpu/quant_k_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace nexus {
namespace {

double weighted_err(const float* v, const float* sw, int n, float d, const uint8_t* L) {
  double e = 0.0;
  for (int j = 0; j < n; ++j) e += sw[j] * std::pow(double(v[j]) - double(d) * L[j], 2);
  return e;
}

TEST(QuantKFit, ScaleCodesBeatTheAbsmaxRule) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  int better = 0;
  for (int trial = 0; trial < 200; ++trial) {
    for (int n : {8, 16}) {
      const int nmax = n == 8 ? 63 : 15;
      float v[16], sw[16];
      for (int j = 0; j < n; ++j) v[j] = u(rng), sw[j] = 0.1f + 10.0f * u(rng) * u(rng);
      uint8_t L[16], A[16];
      const float d = cpu::fit_scale_codes(v, sw, n, nmax, L);
      const float max = *std::max_element(v, v + n);
      for (int j = 0; j < n; ++j)
        A[j] = static_cast<uint8_t>(std::clamp<int>(std::lround(v[j] * nmax / max), 0, nmax));
      for (int j = 0; j < n; ++j) ASSERT_LE(L[j], nmax);
      const double fit = weighted_err(v, sw, n, d, L),
                   absmax = weighted_err(v, sw, n, max / nmax, A);
      ASSERT_LE(fit, absmax * (1 + 1e-5)) << "trial " << trial << " n " << n;
      better += fit < absmax * 0.999;
    }
  }
  EXPECT_GT(better, 200) << "of 400 super-blocks";
  // Multiples of one step come back exactly; all zeros give d 0.
  const float v[8] = {0.0f, 0.5f, 1.0f, 31.5f, 2.0f, 3.0f, 0.5f, 1.5f},
              sw[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  uint8_t L[8];
  const float d = cpu::fit_scale_codes(v, sw, 8, 63, L);
  for (int j = 0; j < 8; ++j) EXPECT_NEAR(d * L[j], v[j], 1e-6f) << j;
  const float z[8] = {};
  EXPECT_EQ(cpu::fit_scale_codes(z, sw, 8, 63, L), 0.0f);
}

}  // namespace
}  // namespace nexus
