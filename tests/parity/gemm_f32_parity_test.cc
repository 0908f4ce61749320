// Our AVX-512 f32 GEMM (backends/cpu/gemm_f32.h) against a double-precision reference, for the
// transpose cases the training GEMMs use (A B, A B^T, A^T B) and A^T B^T, sizes with edges in every
// dimension and more than one pass of k and block of columns, overwrite and accumulate; nothing
// outside C is written; and splitting C's rows or columns over calls gives the same bits. Skipped
// without AVX-512.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "parity/gemm_test_util.h"

namespace nexus {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(GemmF32, MatchesTheDoubleReference) {
  if (!cpu::gemm_f32_avx512_active()) GTEST_SKIP() << "no AVX-512 (or NEXUS_NO_F32_GEMM=1)";
  // 12 x 32 tiles, 256-column blocks, 768-k passes: sizes on and off every one of them.
  const test::GemmCase cases[] = {
      {false, false, 12, 32, 16},    {false, true, 12, 32, 16},    {true, false, 12, 32, 16},
      {false, false, 37, 45, 70},    {false, true, 37, 45, 70},    {true, false, 37, 45, 70},
      {false, false, 13, 33, 770},   {false, true, 25, 257, 769},  {true, false, 100, 257, 771},
      {false, false, 50, 300, 1537}, {false, true, 49, 520, 1600}, {true, true, 61, 290, 1545},
      {false, false, 1, 1, 1},       {false, true, 1, 1, 1},       {true, true, 1, 1, 1},
      {false, true, 24, 64, 9},      {false, false, 7, 17, 3},     {true, false, 110, 40, 5}};
  for (const test::GemmCase& cs : cases) {
    test::expect_gemm_matches_double(cs, random_floats, cpu::gemm_f32_avx512);
    if (HasFatalFailure()) return;
  }
}

// The training splits C's rows (forward, d input, d weight) or columns (d input of wide inputs)
// over the pool's threads: every split gives the one-call result bit for bit, so results never
// depend on the thread count.
TEST(GemmF32, RowAndColumnSplitsMatchOneCall) {
  if (!cpu::gemm_f32_avx512_active()) GTEST_SKIP() << "no AVX-512 (or NEXUS_NO_F32_GEMM=1)";
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      constexpr int64_t m = 61, n = 608, k = 1000;
      const int64_t lda = ta ? m : k, ldb = tb ? k : n;
      const auto a = random_floats(static_cast<size_t>((ta ? k : m) * lda), 4);
      const auto b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), 5);
      const auto c0 = random_floats(static_cast<size_t>(m * n), 6);
      std::vector<float> one = c0, rows = c0, cols = c0;
      cpu::gemm_f32_avx512(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, true, one.data(), n);
      for (int64_t i0 : {int64_t{0}, int64_t{17}}) {  // 17: not a multiple of the tile's 12 rows
        const int64_t i1 = i0 == 0 ? 17 : m;
        cpu::gemm_f32_avx512(ta, tb, i1 - i0, n, k, ta ? a.data() + i0 : a.data() + i0 * lda, lda,
                             b.data(), ldb, true, rows.data() + i0 * n, n);
      }
      for (int64_t j0 : {int64_t{0}, int64_t{80}, int64_t{336}}) {  // not multiples of 256 or 32
        const int64_t j1 = j0 == 0 ? 80 : j0 == 80 ? 336 : n;
        cpu::gemm_f32_avx512(ta, tb, m, j1 - j0, k, a.data(), lda,
                             tb ? b.data() + j0 * ldb : b.data() + j0, ldb, true, cols.data() + j0,
                             n);
      }
      EXPECT_EQ(std::memcmp(one.data(), rows.data(), one.size() * sizeof(float)), 0)
          << "ta=" << ta << " tb=" << tb;
      EXPECT_EQ(std::memcmp(one.data(), cols.data(), one.size() * sizeof(float)), 0)
          << "ta=" << ta << " tb=" << tb;
    }
  }
}

}  // namespace
}  // namespace nexus
