// The AMX-BF16 GEMM (backends/cpu/gemm_amx.h) against a double-precision reference on bf16-valued
// operands, for the three transpose cases the training GEMMs use, sizes with and without edges,
// overwrite and accumulate; nothing outside C is written. Skipped where the CPU or the OS offers
// no AMX.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm_amx.h"

namespace nexus {
namespace {

float bf16_value(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = bf16_value(d(rng));
  return v;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
};

TEST(GemmAmx, MatchesTheDoubleReference) {
  if (!cpu::amx_bf16_active()) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  const Case cases[] = {{false, true, 32, 32, 32},    {false, true, 37, 45, 70},
                        {false, false, 64, 96, 768},  {false, false, 33, 17, 5},
                        {true, false, 96, 64, 130},   {true, false, 1, 1, 1},
                        {false, true, 128, 200, 288}, {true, true, 40, 50, 60}};
  for (const Case& cs : cases) {
    for (bool accumulate : {false, true}) {
      const int64_t lda = (cs.ta ? cs.m : cs.k) + 3, ldb = (cs.tb ? cs.k : cs.n) + 5;
      const int64_t ldc = cs.n + 7, rows_c = cs.m + 2;
      const auto a = random_bf16(static_cast<size_t>((cs.ta ? cs.k : cs.m) * lda), 1);
      const auto b = random_bf16(static_cast<size_t>((cs.tb ? cs.n : cs.k) * ldb), 2);
      const auto c0 = random_bf16(static_cast<size_t>(rows_c * ldc), 3);
      std::vector<float> c = c0;
      if (!accumulate)  // C is not read: NaN anywhere it would be would show
        for (int64_t i = 0; i < cs.m; ++i)
          for (int64_t j = 0; j < cs.n; ++j) c[i * ldc + j] = NAN;
      cpu::gemm_bf16_amx(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, accumulate,
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
            const double x = cs.ta ? a[p * lda + i] : a[i * lda + p];
            const double y = cs.tb ? b[j * ldb + p] : b[p * ldb + j];
            ref += x * y;
            mag += std::fabs(x * y);
          }
          // f32 accumulation of exact products: within k + 1 roundings of the magnitudes.
          const double tol = 6e-8 * static_cast<double>(cs.k + 1) * mag + 1e-30;
          ASSERT_NEAR(got, ref, tol)
              << "ta=" << cs.ta << " tb=" << cs.tb << " m=" << cs.m << " n=" << cs.n
              << " k=" << cs.k << " acc=" << accumulate << " at " << i << "," << j;
        }
      }
    }
  }
}

// Operands that are not bf16 values are rounded to the nearest bf16 first: the result is the
// product of the rounded operands.
TEST(GemmAmx, RoundsOtherInputsToBf16) {
  if (!cpu::amx_bf16_active()) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  const float a[32] = {1.00390625f};  // 1 + 2^-8: halfway, rounds to 1 (even)
  float b[32 * 16] = {};
  b[0] = 3.0f;
  float c[16];
  cpu::gemm_bf16_amx(false, false, 1, 16, 32, a, 32, b, 16, false, c, 16);
  EXPECT_EQ(c[0], 3.0f);
}

}  // namespace
}  // namespace nexus
