// Our AVX-512 f32 GEMM (backends/cpu/gemm_f32.h) against a double-precision reference, for both
// forms the training GEMMs use (B and B^T), sizes with edges in every dimension and more than one
// pass of k and block of columns, overwrite and accumulate; nothing outside C is written; and
// splitting C's rows or columns over calls gives the same bits. Skipped without AVX-512.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm_f32.h"

namespace nexus {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Case {
  bool tb;
  int64_t m, n, k;
};

TEST(GemmF32, MatchesTheDoubleReference) {
  if (!cpu::gemm_f32_avx512_active()) GTEST_SKIP() << "no AVX-512 (or NEXUS_NO_F32_GEMM=1)";
  // 12 x 32 tiles, 256-column blocks, 768-k passes: sizes on and off every one of them.
  const Case cases[] = {{false, 12, 32, 16},   {true, 12, 32, 16},    {false, 37, 45, 70},
                        {true, 37, 45, 70},    {false, 13, 33, 770},  {true, 25, 257, 769},
                        {false, 50, 300, 1537}, {true, 49, 520, 1600}, {false, 1, 1, 1},
                        {true, 1, 1, 1},       {true, 24, 64, 9},     {false, 7, 17, 3}};
  for (const Case& cs : cases) {
    for (bool accumulate : {false, true}) {
      const int64_t lda = cs.k + 3, ldb = (cs.tb ? cs.k : cs.n) + 5;
      const int64_t ldc = cs.n + 7, rows_c = cs.m + 2;
      const auto a = random_floats(static_cast<size_t>(cs.m * lda), 1);
      const auto b = random_floats(static_cast<size_t>((cs.tb ? cs.n : cs.k) * ldb), 2);
      const auto c0 = random_floats(static_cast<size_t>(rows_c * ldc), 3);
      std::vector<float> c = c0;
      if (!accumulate)  // C is not read: NaN anywhere it would be would show
        for (int64_t i = 0; i < cs.m; ++i)
          for (int64_t j = 0; j < cs.n; ++j) c[i * ldc + j] = NAN;
      cpu::gemm_f32_avx512(cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, accumulate,
                           c.data(), ldc);
      for (int64_t i = 0; i < rows_c; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const float got = c[i * ldc + j];
          if (i >= cs.m || j >= cs.n) {
            ASSERT_EQ(std::memcmp(&got, &c0[i * ldc + j], 4), 0)
                << "wrote outside C at " << i << "," << j;
            continue;
          }
          double ref = accumulate ? c0[i * ldc + j] : 0.0, mag = std::fabs(ref);
          for (int64_t p = 0; p < cs.k; ++p) {
            const double x = a[i * lda + p];
            const double y = cs.tb ? b[j * ldb + p] : b[p * ldb + j];
            ref += x * y;
            mag += std::fabs(x * y);
          }
          // f32 fused multiply-adds: within k + 1 roundings of the magnitudes.
          const double tol = 6e-8 * static_cast<double>(cs.k + 1) * mag + 1e-30;
          ASSERT_NEAR(got, ref, tol) << "tb=" << cs.tb << " m=" << cs.m << " n=" << cs.n
                                     << " k=" << cs.k << " acc=" << accumulate << " at " << i
                                     << "," << j;
        }
      }
    }
  }
}

// The training splits C's rows (forward, d input) or columns (d input of wide inputs) over the
// pool's threads: every split gives the one-call result bit for bit, so results never depend on
// the thread count.
TEST(GemmF32, RowAndColumnSplitsMatchOneCall) {
  if (!cpu::gemm_f32_avx512_active()) GTEST_SKIP() << "no AVX-512 (or NEXUS_NO_F32_GEMM=1)";
  for (bool tb : {false, true}) {
    constexpr int64_t m = 61, n = 608, k = 1000;
    const int64_t ldb = tb ? k : n;
    const auto a = random_floats(static_cast<size_t>(m * k), 4);
    const auto b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), 5);
    const auto c0 = random_floats(static_cast<size_t>(m * n), 6);
    std::vector<float> one = c0, rows = c0, cols = c0;
    cpu::gemm_f32_avx512(tb, m, n, k, a.data(), k, b.data(), ldb, true, one.data(), n);
    for (int64_t i0 : {int64_t{0}, int64_t{17}}) {  // 17: not a multiple of the tile's 12 rows
      const int64_t i1 = i0 == 0 ? 17 : m;
      cpu::gemm_f32_avx512(tb, i1 - i0, n, k, a.data() + i0 * k, k, b.data(), ldb, true,
                           rows.data() + i0 * n, n);
    }
    for (int64_t j0 : {int64_t{0}, int64_t{80}, int64_t{336}}) {  // not multiples of 256 or 32
      const int64_t j1 = j0 == 0 ? 80 : j0 == 80 ? 336 : n;
      cpu::gemm_f32_avx512(tb, m, j1 - j0, k, a.data(), k, tb ? b.data() + j0 * ldb : b.data() + j0,
                           ldb, true, cols.data() + j0, n);
    }
    EXPECT_EQ(std::memcmp(one.data(), rows.data(), one.size() * sizeof(float)), 0) << "tb=" << tb;
    EXPECT_EQ(std::memcmp(one.data(), cols.data(), one.size() * sizeof(float)), 0) << "tb=" << tb;
  }
}

}  // namespace
}  // namespace nexus
