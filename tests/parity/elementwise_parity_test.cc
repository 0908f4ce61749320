// AVX2 SwiGLU against a double-precision reference (and the scalar kernel) over odd lengths and
// a wide input range, including inputs whose exp overflows in f32.
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
