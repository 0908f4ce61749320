// AVX2 SwiGLU and RMSNorm against double-precision references (and the scalar kernels) over odd
// lengths and wide input ranges, including SwiGLU inputs whose exp overflows in f32; the sampler's
// copy with block maxima against a plain loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/norm.h"
#include "ops/elementwise.h"

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
    cpu::swiglu_forward_avx2(ga.data(), ga.data(), u.data(), n);
    cpu::swiglu_forward_scalar(gs.data(), gs.data(), u.data(), n);
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

// AVX2 RMSNorm rows against a double reference, with weights of ones and random ones, odd widths,
// rows of very different scales.
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
    const std::vector<float> ones(dim, 1.0f);
    for (const float* wp : {ones.data(), static_cast<const float*>(w.data())}) {
      std::vector<float> ya(rows * dim), ys(rows * dim);
      float rstd;
      for (int64_t r = 0; r < rows; ++r) {
        cpu::rmsnorm_forward_row_avx2(&ya[r * dim], &rstd, &x[r * dim], wp, dim, 1e-5f);
        cpu::rmsnorm_forward_row_scalar(&ys[r * dim], &rstd, &x[r * dim], wp, dim, 1e-5f);
      }
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int64_t i = 0; i < dim; ++i) {
          const double ref = x[r * dim + i] * inv * wp[i];
          EXPECT_NEAR(ya[r * dim + i], ref, 3e-7 * std::fabs(ref) + 1e-30) << dim << " " << r;
          EXPECT_NEAR(ys[r * dim + i], ref, 3e-7 * std::fabs(ref) + 1e-30) << dim << " " << r;
        }
      }
    }
  }
}

// copy_block_max, scalar and AVX2 (with and without the copy): the copy bit for bit, each block's
// max equal to a plain loop's
// (a -0 / +0 tie may be either zero), and the NaN / +inf flag wherever the bad value sits,
// including the short last block.
TEST(ElementwiseParity, CopyBlockMaxMatchesPlainLoop) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  using Fn = bool (*)(const float*, float*, int64_t, float*);
  std::vector<Fn> fns = {cpu::copy_block_max_scalar};
  if (cpu::active_isa() == cpu::Isa::kAvx2) fns.push_back(cpu::copy_block_max_avx2);
  for (int64_t n : {1, 7, 63, 64, 65, 200, 4096, 151936}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    // A block of -inf, zeros of both signs, and a maximum in the last entry.
    for (int64_t i = 0; i < std::min<int64_t>(n, 64); ++i) x[i] = -kInf;
    if (n > 70) x[64] = -0.0f, x[65] = 0.0f;
    x[n - 1] = 50.0f;
    const int64_t nb = (n + kBlockMaxEntries - 1) / kBlockMaxEntries;
    std::vector<float> want(nb, -kInf);
    for (int64_t i = 0; i < n; ++i)
      want[i / kBlockMaxEntries] = std::max(want[i / kBlockMaxEntries], x[i]);
    for (Fn fn : fns) {
      std::vector<float> dst(n, 1.0f), bm(nb, 1.0f);
      EXPECT_TRUE(fn(x.data(), dst.data(), n, bm.data())) << n;
      EXPECT_EQ(0, std::memcmp(dst.data(), x.data(), n * sizeof(float))) << n;
      for (int64_t b = 0; b < nb; ++b) EXPECT_EQ(bm[b], want[b]) << "n " << n << " block " << b;
      std::vector<float> bm_only(nb, 1.0f);  // no copy: the maxima alone
      EXPECT_TRUE(fn(x.data(), nullptr, n, bm_only.data())) << n;
      for (int64_t b = 0; b < nb; ++b)
        EXPECT_EQ(bm_only[b], want[b]) << "n " << n << " block " << b;
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
        for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
          std::vector<float> y = x;
          y[at] = bad;
          std::vector<float> d(n), m(nb);
          EXPECT_FALSE(fn(y.data(), d.data(), n, m.data())) << "n " << n << " at " << at;
          EXPECT_FALSE(fn(y.data(), nullptr, n, m.data())) << "n " << n << " at " << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nexus
