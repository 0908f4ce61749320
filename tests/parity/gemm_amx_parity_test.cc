// The AMX-BF16 GEMM (backends/cpu/gemm_amx.h) against a double-precision reference on bf16-valued
// operands, for the three transpose cases the training GEMMs use, sizes with and without edges,
// overwrite and accumulate; nothing outside C is written. Skipped where the CPU or the OS offers
// no AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "backends/cpu/gemm_amx.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "nexus/tensor.h"
#include "ops/matmul.h"
#include "nexus/dtype.h"
#include "parity/gemm_test_util.h"
#include "ops/train_ops.h"

namespace nexus {
namespace {

float bf16_value(float f) { return bf16_to_f32(f32_to_bf16(f)); }

std::vector<float> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = bf16_value(d(rng));
  return v;
}

TEST(GemmAmx, MatchesTheDoubleReference) {
  if (!cpu::amx_bf16_active()) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  // The products of bf16 values are exact in f32, so the f32 accumulation bound applies.
  const test::GemmCase cases[] = {{false, true, 32, 32, 32},    {false, true, 37, 45, 70},
                                  {false, false, 64, 96, 768},  {false, false, 33, 17, 5},
                                  {true, false, 96, 64, 130},   {true, false, 1, 1, 1},
                                  {false, true, 128, 200, 288}, {true, true, 40, 50, 60}};
  for (const test::GemmCase& cs : cases) {
    test::expect_gemm_matches_double(cs, random_bf16, cpu::gemm_bf16_amx);
    if (HasFatalFailure()) return;
  }
}

// The two-part form the training GEMMs use (op(A) converted once in row ranges, C's columns in
// shares, each packing its own columns of op(B)) gives the one-call result bit for bit.
TEST(GemmAmx, SplitConversionAndColumnSharesMatchOneCall) {
  if (!cpu::amx_bf16_active()) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      constexpr int64_t m = 37, n = 80, k = 70;
      const int64_t lda = ta ? m : k, ldb = tb ? k : n;
      const auto a = random_bf16(static_cast<size_t>((ta ? k : m) * lda), 4);
      const auto b = random_bf16(static_cast<size_t>((tb ? n : k) * ldb), 5);
      std::vector<float> one(m * n), split(m * n);
      cpu::gemm_bf16_amx(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, false, one.data(), n);
      std::vector<uint16_t> rows(cpu::bf16_rows_size(m, k), 0xFFFF);
      cpu::convert_bf16_rows(ta, m, k, a.data(), lda, 0, 16, rows.data());
      cpu::convert_bf16_rows(ta, m, k, a.data(), lda, 16, 64, rows.data());
      for (int64_t j0 : {int64_t{0}, int64_t{48}}) {
        const int64_t j1 = j0 == 0 ? 48 : n;
        cpu::gemm_bf16_amx_rows(rows.data(), m, k, tb, j1 - j0,
                                tb ? b.data() + j0 * ldb : b.data() + j0, ldb, false,
                                split.data() + j0, n);
      }
      EXPECT_EQ(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)), 0)
          << "ta=" << ta << " tb=" << tb;
    }
  }
}

// The training GEMMs with bf16 operands on a two-thread pool (op(A) converted once by both
// threads, then column shares) against the same calls on sgemm: forward, d input and d weight
// within f32 accumulation error.
TEST(GemmAmx, TrainingGemmsOnAPoolMatchSgemm) {
  if (!cpu::amx_bf16_active()) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  ThreadPool pool(2);
  constexpr int64_t n = 1040, c = 96, oc = 1056;  // large enough for AMX, edges included
  const auto x = random_bf16(n * c, 6), w = random_bf16(oc * c, 7), dy = random_bf16(n * oc, 8);
  auto close = [](const std::vector<float>& got, const std::vector<float>& want, double scale) {
    for (size_t i = 0; i < got.size(); ++i)
      if (std::fabs(got[i] - want[i]) > 1e-5 * scale) return false;
    return true;
  };
  std::vector<float> y_amx(n * oc), y_ref(n * oc);
  matmul_forward(y_amx.data(), x.data(), w.data(), n, c, oc, &pool, true);
  matmul_forward(y_ref.data(), x.data(), w.data(), n, c, oc, &pool, false);
  EXPECT_TRUE(close(y_amx, y_ref, c));
  std::vector<float> dx_amx(n * c, 1.0f), dx_ref(n * c, 1.0f), dw_amx(oc * c, 2.0f),
      dw_ref(oc * c, 2.0f);
  matmul_backward(dx_amx.data(), dw_amx.data(), dy.data(), x.data(), w.data(), n, c, oc,
                         &pool, true);
  matmul_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), n, c, oc,
                         &pool, false);
  EXPECT_TRUE(close(dx_amx, dx_ref, oc));
  EXPECT_TRUE(close(dw_amx, dw_ref, n));
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
  // A NaN whose rounding would carry into the sign bit stays a NaN, in both the vector path
  // (32 elements) and the scalar tail (k = 33).
  float na[33] = {};
  uint32_t all_ones = 0x7FFFFFFFu;
  std::memcpy(&na[0], &all_ones, 4);
  std::memcpy(&na[32], &all_ones, 4);
  float nb[34 * 16] = {};
  nb[0] = 1.0f;
  cpu::gemm_bf16_amx(false, false, 1, 16, 32, na, 33, nb, 16, false, c, 16);
  EXPECT_TRUE(std::isnan(c[0]));
  std::fill(nb, nb + 34 * 16, 0.0f);
  nb[32 * 16] = 1.0f;
  cpu::gemm_bf16_amx(false, false, 1, 16, 33, na, 33, nb, 16, false, c, 16);
  EXPECT_TRUE(std::isnan(c[0]));
}

// Prefill against BF16 weights (gemm_bf16w_amx.cc), through matmul() and matmul_group() on a
// two-thread pool: Y = X W^T with X rounded to bf16, against a double-precision sum of the same
// rounded products. Token counts and row counts off the tiles' 16 and 32, two weights of a group.
TEST(GemmAmx, Bf16WeightPrefillMatchesTheDoubleReference) {
  if (!cpu::bf16w_amx_usable(64)) GTEST_SKIP() << "no AMX-BF16 on this CPU or OS";
  ThreadPool pool(2);
  Arena scratch(8 << 20, MemCategory::kScratch);
  for (const auto& [n, rows, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 32, 32},
                                  {37, 45, 64},
                                  {100, 200, 768},
                                  {513, 70, 96}}) {
    std::mt19937 rng(static_cast<uint32_t>(n + rows + k));
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint16_t> w(rows * k), w2(rows * k);
    for (auto& v : w) v = f32_to_bf16(d(rng));
    for (auto& v : w2) v = f32_to_bf16(d(rng));
    std::vector<float> x(n * k);
    for (float& v : x) v = d(rng);  // not bf16 values: matmul rounds them
    const Tensor wt(DType::kBF16, {rows, k}, w.data()), wt2(DType::kBF16, {rows, k}, w2.data());
    std::vector<float> y(n * rows, -7.0f), y2(n * rows, -7.0f), g1(n * rows), g2(n * rows);
    matmul(wt, x.data(), n, y.data(), pool, scratch);
    const MatmulOut outs[2] = {{&wt, g1.data()}, {&wt2, g2.data()}};
    matmul_group(outs, 2, x.data(), n, pool, scratch);
    double worst = 0.0;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0.0, want2 = 0.0, mag = 0.0, mag2 = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double xv = bf16_value(x[t * k + p]);
          want += xv * bf16_to_f32(w[r * k + p]);
          want2 += xv * bf16_to_f32(w2[r * k + p]);
          mag += std::fabs(xv * bf16_to_f32(w[r * k + p]));
          mag2 += std::fabs(xv * bf16_to_f32(w2[r * k + p]));
        }
        // f32 accumulation of exact products: within a few k ulps of the sum of |products|.
        worst = std::max(worst, std::fabs(y[t * rows + r] - want) / (mag + 1e-30));
        ASSERT_NEAR(y[t * rows + r], want, 1e-5 * mag + 1e-6)
            << "n " << n << " rows " << rows << " k " << k << " token " << t << " row " << r;
        ASSERT_NEAR(g2[t * rows + r], want2, 1e-5 * mag2 + 1e-6);
        ASSERT_EQ(g1[t * rows + r], y[t * rows + r]);  // alone or in a group: the same bits
      }
    std::printf("  n %lld rows %lld k %lld: worst error %.2g of the sum of |products|\n",
                static_cast<long long>(n), static_cast<long long>(rows),
                static_cast<long long>(k), worst);
  }
}

}  // namespace
}  // namespace nexus
