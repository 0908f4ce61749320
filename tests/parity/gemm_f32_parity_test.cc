// Our f32 GEMM kernels (backends/cpu/gemm_f32.h: AVX-512 and AVX2, each where the CPU runs it)
// against a double-precision reference, for the transpose cases the training GEMMs use (A B, A B^T,
// A^T B) and A^T B^T, sizes with edges in every dimension and more than one pass of k and block of
// columns, overwrite and accumulate; nothing outside C is written; and splitting C's rows or
// columns over calls gives the same bits; the AVX2 form that reads B as f16 or bf16 rows
// (prefill's F16 and BF16 weights) gives the bits of the f32 form on B converted. Skipped where
// neither kernel runs.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"
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

using GemmF32Fn = void (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                           const float*, int64_t, bool, float*, int64_t, float*, bool);

// One kernel, called with gemm_f32.h's default arguments.
struct Gemm {
  const char* name;
  GemmF32Fn fn;
  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, bool acc, float* c, int64_t ldc,
                  float* row_sums = nullptr, bool trans_c = false) const {
    fn(ta, tb, m, n, k, a, lda, b, ldb, acc, c, ldc, row_sums, trans_c);
  }
};

// The kernels this CPU runs. (NEXUS_NO_F32_GEMM only stops the training from using them.)
std::vector<Gemm> kernels() {
  std::vector<Gemm> out;
  if (cpu::avx512_active()) out.push_back({"avx512", &cpu::gemm_f32_avx512});
  if (cpu::active_isa() == cpu::Isa::kAvx2) out.push_back({"avx2", &cpu::gemm_f32_avx2});
  return out;
}

TEST(GemmF32, MatchesTheDoubleReference) {
  const auto ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no AVX2/FMA or AVX-512 kernels";
  for (const Gemm& gemm : ks) {
    SCOPED_TRACE(gemm.name);
    // 12 x 32 tiles, 256-column blocks, 768-k passes (AVX2: 6 x 16, 160-224 columns, 384 k):
    // sizes on and off every one of them.
    const test::GemmCase cases[] = {
        {false, false, 12, 32, 16},    {false, true, 12, 32, 16},    {true, false, 12, 32, 16},
        {false, false, 37, 45, 70},    {false, true, 37, 45, 70},    {true, false, 37, 45, 70},
        {false, false, 13, 33, 770},   {false, true, 25, 257, 769},  {true, false, 100, 257, 771},
        {false, false, 50, 300, 1537}, {false, true, 49, 520, 1600}, {true, true, 61, 290, 1545},
        {false, false, 1, 1, 1},       {false, true, 1, 1, 1},       {true, true, 1, 1, 1},
        {false, true, 24, 64, 9},      {false, false, 7, 17, 3},     {true, false, 110, 40, 5}};
    for (const test::GemmCase& cs : cases) {
      test::expect_gemm_matches_double(
          cs, random_floats,
          [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, bool acc, float* c,
              int64_t ldc) { gemm(ta, tb, m, n, k, a, lda, b, ldb, acc, c, ldc); });
      if (HasFatalFailure()) return;
    }
  }
}

// A^T's row sums (a bias gradient summed while dout^T is packed): each row's sum over k added to
// row_sums, within k + 1 roundings of a double sum, on sizes across the 12-row panels, the
// 96-row sweeps and the 768-k passes; rows split over calls give the same bits.
TEST(GemmF32, RowSumsOfTransposedAMatchDouble) {
  const auto ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no AVX2/FMA or AVX-512 kernels";
  for (const Gemm& gemm : ks) {
    SCOPED_TRACE(gemm.name);
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {13, 40, 70}, {100, 64, 1545}}) {
      const int64_t lda = m + 3;
      const auto a = random_floats(static_cast<size_t>(k * lda), 7);
      const auto b = random_floats(static_cast<size_t>(k * n), 8);
      const auto s0 = random_floats(static_cast<size_t>(m), 9);
      std::vector<float> c(m * n), sums = s0, split = s0, c2(m * n);
      gemm(true, false, m, n, k, a.data(), lda, b.data(), n, false, c.data(), n, sums.data());
      for (int64_t i = 0; i < m; ++i) {
        double ref = s0[i], mag = std::fabs(ref);
        for (int64_t p = 0; p < k; ++p) {
          ref += a[p * lda + i];
          mag += std::fabs(a[p * lda + i]);
        }
        ASSERT_NEAR(sums[i], ref, 6e-8 * static_cast<double>(k + 1) * mag)
            << "m=" << m << " k=" << k << " row " << i;
      }
      const int64_t cut = m / 3;
      gemm(true, false, cut, n, k, a.data(), lda, b.data(), n, false, c2.data(), n, split.data());
      gemm(true, false, m - cut, n, k, a.data() + cut, lda, b.data(), n, false, c2.data() + cut * n,
           n, split.data() + cut);
      EXPECT_EQ(std::memcmp(sums.data(), split.data(), sums.size() * sizeof(float)), 0)
          << "m=" << m;
    }
  }
}

// With trans_c, C is held transposed (the output head's d weight, written as dw^T = inp^T dout
// into dw): the same bits as the plain layout at every element, on sizes across the tile's 12 rows
// and 32 columns and the 768-k passes, overwrite and accumulate, and nothing written between
// C^T's rows (ldc past m).
TEST(GemmF32, TransposedCGivesThePlainBits) {
  const auto ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no AVX2/FMA or AVX-512 kernels";
  for (const Gemm& gemm : ks) {
    SCOPED_TRACE(gemm.name);
    const test::GemmCase cases[] = {{true, false, 288, 700, 512}, {true, false, 37, 45, 70},
                                    {false, false, 13, 33, 770},  {false, true, 25, 257, 769},
                                    {true, true, 12, 32, 16},     {true, false, 1, 1, 1}};
    for (const test::GemmCase& cs : cases) {
      const int64_t lda = cs.ta ? cs.m : cs.k, ldb = cs.tb ? cs.k : cs.n, ldt = cs.m + 5;
      const auto a = random_floats(static_cast<size_t>((cs.ta ? cs.k : cs.m) * lda), 11);
      const auto b = random_floats(static_cast<size_t>((cs.tb ? cs.n : cs.k) * ldb), 12);
      const auto c0 = random_floats(static_cast<size_t>(cs.m * cs.n), 13);
      const auto t0 = random_floats(static_cast<size_t>(cs.n * ldt), 14);
      for (bool acc : {false, true}) {
        std::vector<float> c = c0, t = t0;
        for (int64_t i = 0; i < cs.m; ++i)
          for (int64_t j = 0; j < cs.n; ++j) t[j * ldt + i] = c0[i * cs.n + j];
        gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, acc, c.data(), cs.n);
        gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, acc, t.data(), ldt,
             nullptr, true);
        for (int64_t j = 0; j < cs.n; ++j)
          for (int64_t i = 0; i < ldt; ++i) {
            const float want = i < cs.m ? c[i * cs.n + j] : t0[j * ldt + i];
            ASSERT_EQ(std::memcmp(&t[j * ldt + i], &want, sizeof(float)), 0)
                << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " acc=" << acc << " at C(" << i
                << "," << j << ")" << (i < cs.m ? "" : ", outside C");
          }
      }
    }
  }
}

// The training splits C's rows (forward, d input, d weight) or columns (d input of wide inputs)
// over the pool's threads: every split gives the one-call result bit for bit, so results never
// depend on the thread count.
TEST(GemmF32, RowAndColumnSplitsMatchOneCall) {
  const auto ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no AVX2/FMA or AVX-512 kernels";
  for (const Gemm& gemm : ks) {
    SCOPED_TRACE(gemm.name);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        constexpr int64_t m = 61, n = 608, k = 1000;
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        const auto a = random_floats(static_cast<size_t>((ta ? k : m) * lda), 4);
        const auto b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), 5);
        const auto c0 = random_floats(static_cast<size_t>(m * n), 6);
        std::vector<float> one = c0, rows = c0, cols = c0;
        gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, true, one.data(), n);
        for (int64_t i0 : {int64_t{0}, int64_t{17}}) {  // 17: not a multiple of the tile's 12 rows
          const int64_t i1 = i0 == 0 ? 17 : m;
          gemm(ta, tb, i1 - i0, n, k, ta ? a.data() + i0 : a.data() + i0 * lda, lda, b.data(), ldb,
               true, rows.data() + i0 * n, n);
        }
        for (int64_t j0 : {int64_t{0}, int64_t{80}, int64_t{336}}) {  // not multiples of 256 or 32
          const int64_t j1 = j0 == 0 ? 80 : j0 == 80 ? 336 : n;
          gemm(ta, tb, m, j1 - j0, k, a.data(), lda, tb ? b.data() + j0 * ldb : b.data() + j0, ldb,
               true, cols.data() + j0, n);
        }
        EXPECT_EQ(std::memcmp(one.data(), rows.data(), one.size() * sizeof(float)), 0)
            << "ta=" << ta << " tb=" << tb;
        EXPECT_EQ(std::memcmp(one.data(), cols.data(), one.size() * sizeof(float)), 0)
            << "ta=" << ta << " tb=" << tb;
      }
    }
  }
}

// gemm_f32_pool: every thread of the pool claims (pass, column block) units as it frees up. The
// result is the one-call bits for any pool size, with C plain or transposed, overwritten or
// accumulated; k of three passes and n of a few blocks make threads wait on a block's previous
// pass (a unit run before it would change the sums' order, and the bits).
TEST(GemmF32, PoolOfThreadsMatchesOneCall) {
  if (!cpu::gemm_f32_active()) GTEST_SKIP() << "our f32 GEMM is not active on this CPU";
  const test::GemmCase cases[] = {{false, true, 96, 1000, 288}, {false, true, 61, 40, 1000},
                                  {false, false, 500, 70, 1000},
                                  {true, false, 288, 700, 512}, {false, false, 37, 333, 770},
                                  {true, true, 13, 17, 1200},   {false, true, 1, 33, 5}};
  for (const test::GemmCase& cs : cases) {
    const int64_t lda = cs.ta ? cs.m : cs.k, ldb = cs.tb ? cs.k : cs.n;
    const auto a = random_floats(static_cast<size_t>((cs.ta ? cs.k : cs.m) * lda), 21);
    const auto b = random_floats(static_cast<size_t>((cs.tb ? cs.n : cs.k) * ldb), 22);
    const auto c0 = random_floats(static_cast<size_t>(cs.m * cs.n), 23);
    for (bool trans_c : {false, true}) {
      const int64_t ldc = trans_c ? cs.m : cs.n;
      for (bool acc : {false, true}) {
        std::vector<float> want = c0;
        cpu::gemm_f32(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, acc,
                      want.data(), ldc, nullptr, trans_c);
        for (int threads = 1; threads <= 4; ++threads) {
          ThreadPool pool(threads);
          for (int rep = 0; rep < 3; ++rep) {  // schedules differ from run to run
            std::vector<float> got = c0;
            cpu::gemm_f32_pool(&pool, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(),
                               ldb, acc, got.data(), ldc, trans_c);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << "columns: m=" << cs.m << " n=" << cs.n << " k=" << cs.k
                << " trans_c=" << trans_c << " acc=" << acc << " threads=" << threads;
            got = c0;
            cpu::gemm_f32_pool_rows(&pool, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda,
                                    b.data(), ldb, acc, got.data(), ldc, nullptr, trans_c);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << "rows: m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " trans_c=" << trans_c
                << " acc=" << acc << " threads=" << threads;
          }
        }
      }
    }
  }
}

// The row form with row sums (a d weight's bias gradient, summed as dout^T is packed): each row's
// passes are summed by the one unit that packs them, in order, so the sums are the one call's too.
TEST(GemmF32, PoolOfThreadsByRowsKeepsTheRowSums) {
  if (!cpu::gemm_f32_active()) GTEST_SKIP() << "our f32 GEMM is not active on this CPU";
  constexpr int64_t m = 300, n = 72, k = 1100;  // A^T [k x m]: three passes, 300 rows of C
  const auto a = random_floats(static_cast<size_t>(k * m), 31);
  const auto b = random_floats(static_cast<size_t>(k * n), 32);
  const auto c0 = random_floats(static_cast<size_t>(m * n), 33);
  const auto s0 = random_floats(static_cast<size_t>(m), 34);
  std::vector<float> want = c0, want_sums = s0;
  cpu::gemm_f32(true, false, m, n, k, a.data(), m, b.data(), n, true, want.data(), n,
                want_sums.data());
  for (int threads = 2; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    std::vector<float> got = c0, sums = s0;
    cpu::gemm_f32_pool_rows(&pool, true, false, m, n, k, a.data(), m, b.data(), n, true,
                            got.data(), n, sums.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << threads;
    EXPECT_EQ(std::memcmp(want_sums.data(), sums.data(), sums.size() * sizeof(float)), 0)
        << threads;
  }
}

// B's elements f16 or bf16, converted as op(B) is packed (prefill's F16 and BF16 weights as B^T,
// attention's F16 values as B): the bits of the AVX2 kernel on B converted to f32 first, overwrite
// and accumulate, on sizes across the 6 x 16 tile, the column blocks and the 384-k passes (tails
// under 8 included), with B's rows strided past their length and NaN in the stride's padding
// (read, it would show), and nothing written outside C.
TEST(GemmF32, HalfRowsGiveTheBitsOfTheirF32Conversion) {
  if (cpu::active_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2/FMA kernels";
  for (bool bf16 : {false, true})
    for (bool tb : {true, false})
      for (bool acc : {false, true})
        for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1},
                               {7, 17, 3},
                               {6, 16, 8},
                               {37, 45, 70},
                               {25, 257, 769},
                               {13, 300, 1537},
                               {64, 500, 288},
                               {128, 64, 512}}) {
          SCOPED_TRACE(std::string(bf16 ? "bf16" : "f16") + (tb ? " B^T" : " B") +
                       (acc ? " accumulate" : ""));
          const int64_t b_rows = tb ? n : k, b_len = tb ? k : n;
          const int64_t ldb = b_len + 5, ldc = n + 7, rows_c = m + 2;
          const auto a = random_floats(static_cast<size_t>(m * k), 1);
          const auto values = random_floats(static_cast<size_t>(b_rows * ldb), 2);
          std::vector<uint16_t> bh(values.size());
          std::vector<float> bf(values.size());
          for (size_t i = 0; i < values.size(); ++i) {
            const bool pad = static_cast<int64_t>(i % ldb) >= b_len;
            const uint16_t nan = bf16 ? uint16_t{0x7fc0} : uint16_t{0x7e00};
            bh[i] = pad ? nan : bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
            bf[i] = bf16 ? bf16_to_f32(bh[i]) : f16_to_f32(bh[i]);
          }
          std::vector<float> want = random_floats(static_cast<size_t>(rows_c * ldc), 3);
          std::vector<float> got = want;
          cpu::gemm_f32_avx2(false, tb, m, n, k, a.data(), k, bf.data(), ldb, acc, want.data(),
                             ldc);
          cpu::gemm_f32_half_b_avx2(bf16, tb, m, n, k, a.data(), k, bh.data(), ldb, acc, got.data(),
                                    ldc);
          for (int64_t i = 0; i < rows_c; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              ASSERT_EQ(std::memcmp(&got[at], &want[at], sizeof(float)), 0)
                  << "m=" << m << " n=" << n << " k=" << k << " at [" << i << ", " << j
                  << "]: " << got[at] << " vs " << want[at]
                  << (i >= m || j >= n ? " (outside C)" : "");
            }
        }
}

// Prefill's group on the AVX-512 kernel: up to three weights (f32, f16 or bf16 rows, strided, NaN
// in the padding) on one A, each C the bits of gemm_f32_avx512 on its B converted to f32, across
// the 12 x 32 tile, the column blocks and the 768-k passes.
TEST(GemmF32, Avx512GroupGivesEachBTheBitsOfItsF32Conversion) {
  if (!cpu::avx512_active()) GTEST_SKIP() << "no AVX-512 kernels on this CPU";
  for (cpu::GemmBType type : {cpu::GemmBType::kF32, cpu::GemmBType::kF16, cpu::GemmBType::kBF16})
    for (auto [m, k] : {std::array<int64_t, 2>{1, 1}, {13, 70}, {37, 769}, {64, 1537}}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + " m=" + std::to_string(m) +
                   " k=" + std::to_string(k));
      const int64_t ns[3] = {1, 45, 300};
      const auto a = random_floats(static_cast<size_t>(m * k), 4);
      std::vector<std::vector<uint16_t>> bh(3);
      std::vector<std::vector<float>> bf(3), got(3), want(3);
      cpu::GemmBRows bs[3];
      const int64_t ldb = k + 3;
      for (int g = 0; g < 3; ++g) {
        const auto values = random_floats(static_cast<size_t>(ns[g] * ldb), 5 + g);
        bh[g].resize(values.size());
        bf[g].resize(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          const bool pad = static_cast<int64_t>(i % ldb) >= k;
          const bool b16 = type == cpu::GemmBType::kBF16;
          bh[g][i] = pad ? uint16_t{0x7e00} : b16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
          bf[g][i] = type == cpu::GemmBType::kF32 ? (pad ? NAN : values[i])
                     : b16                        ? bf16_to_f32(bh[g][i])
                                                  : f16_to_f32(bh[g][i]);
        }
        const int64_t ldc = ns[g] + 2;
        want[g] = random_floats(static_cast<size_t>(m * ldc), 9);
        got[g] = want[g];
        cpu::gemm_f32_avx512(false, true, m, ns[g], k, a.data(), k, bf[g].data(), ldb, false,
                             want[g].data(), ldc);
        const void* b = type == cpu::GemmBType::kF32 ? static_cast<const void*>(bf[g].data())
                                                     : static_cast<const void*>(bh[g].data());
        bs[g] = {b, ldb, ns[g], got[g].data(), ldc};
      }
      cpu::gemm_f32_group_avx512(type, 3, bs, m, k, a.data(), k);
      for (int g = 0; g < 3; ++g)
        ASSERT_EQ(std::memcmp(got[g].data(), want[g].data(), got[g].size() * sizeof(float)), 0)
            << "weight " << g;
    }
}

}  // namespace
}  // namespace nexus
