// AVX2 SwiGLU and RMSNorm against double-precision references (and the scalar kernels) over odd
// lengths and wide input ranges, including SwiGLU inputs whose exp overflows in f32.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/quant.h"

namespace nexus {
namespace {

TEST(ElementwiseParity, SwigluAvx2MatchesReference) {
  if (cpu::active_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {1, 7, 8, 9, 63, 1000}) {
    std::vector<float> g(n), u(n);
    for (float& x : g) x = nd(rng);
    for (float& x : u) x = nd(rng);
    if (n == 1000) {
      g[0] = 100.0f, g[1] = -100.0f, g[2] = 0.0f, g[3] = -0.0f, g[4] = 88.0f, g[5] = -90.0f;
    }
    std::vector<float> ga = g, gs = g;
    cpu::swiglu_avx2(ga.data(), u.data(), n);
    cpu::swiglu_scalar(gs.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[i];
      const double ref = x / (1.0 + std::exp(-x)) * u[i];
      const double tol = 1e-6 * std::fabs(ref) + 1e-30;
      EXPECT_NEAR(ga[i], ref, tol) << "n=" << n << " x=" << x;
      EXPECT_NEAR(gs[i], ref, tol) << "n=" << n << " x=" << x;
    }
  }
}

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// AVX2 RMSNorm against a double reference, with and without weights, odd widths, rows of very
// different scales.
TEST(ElementwiseParity, RmsNormAvx2MatchesReference) {
  if (cpu::active_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t dim : {1, 7, 8, 13, 128, 291}) {
    const int64_t rows = 5;
    std::vector<float> x(rows * dim), w(dim);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < dim; ++i) x[r * dim + i] = nd(rng) * std::pow(10.0f, r - 2.0f);
    for (float& v : w) v = nd(rng);
    for (const float* wp : {static_cast<const float*>(nullptr), static_cast<const float*>(w.data())}) {
      std::vector<float> ya(rows * dim), ys(rows * dim);
      cpu::rms_norm_avx2(x.data(), wp, 1e-5f, ya.data(), rows, dim);
      cpu::rms_norm_scalar(x.data(), wp, 1e-5f, ys.data(), rows, dim);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int64_t i = 0; i < dim; ++i) {
          const double ref = x[r * dim + i] * inv * (wp ? wp[i] : 1.0);
          EXPECT_NEAR(ya[r * dim + i], ref, 3e-7 * std::fabs(ref) + 1e-30) << dim << " " << r;
          EXPECT_NEAR(ys[r * dim + i], ref, 3e-7 * std::fabs(ref) + 1e-30) << dim << " " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nexus
