// Parity of the quantization kernels, per dtype, at odd sizes: scalar vs AVX2 (identical
// dequantization and activation quantization, near-identical dot products), quantization error
// bounds, and vec_dot against double-precision dots of the dequantized rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "backends/cpu/gemm.h"
#include "parity/quant_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;
using test::random_blocks;
using test::random_floats;

// Element counts per row: 1, 3 and 7 blocks (odd lengths for the plain float types).
std::vector<int64_t> test_sizes(DType t) {
  const int64_t bs = traits(t).block_size;
  if (bs == 1) return {1, 37, 259};
  return {bs, 3 * bs, 7 * bs};
}
constexpr int kRows = 3;

// Largest relative RMSE of quantize -> dequantize on Gaussian data. Set about 1.2x above the
// measured values so a real regression (worse rounding, a wrong scale) fails.
double rmse_bound(DType t) {
  static const std::map<DType, double> bounds = {
      {DType::kF32, 0.0},     {DType::kF16, 2.6e-4}, {DType::kBF16, 3.2e-3}, {DType::kQ4_0, 0.105},
      {DType::kQ4_1, 0.10},   {DType::kQ5_0, 0.055}, {DType::kQ5_1, 0.047},  {DType::kQ8_0, 0.0068},
      {DType::kQ8_1, 0.0068}, {DType::kQ2_K, 0.34},  {DType::kQ3_K, 0.176},  {DType::kQ4_K, 0.088},
      {DType::kQ5_K, 0.044},  {DType::kQ6_K, 0.021}, {DType::kQ8_K, 0.009},
  };
  return bounds.at(t);
}

class QuantParity : public ::testing::TestWithParam<DType> {
 protected:
  bool have_avx2() const { return cpu::isa_supported(Isa::kAvx2); }
};

TEST_P(QuantParity, RoundTripErrorWithinBound) {
  const DType t = GetParam();
  for (int64_t n : test_sizes(t)) {
    double err = 0.0, ref = 0.0;
    for (int r = 0; r < kRows; ++r) {
      const auto x = random_floats(n, 100 + 7 * r + static_cast<uint32_t>(n), 1.0f, false);
      const auto y = test::dequantize(t, test::quantize(t, x), n);
      for (int64_t i = 0; i < n; ++i) {
        err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        ref += static_cast<double>(x[i]) * x[i];
      }
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LE(rel, rmse_bound(t)) << dtype_name(t) << " n=" << n;
    // The bound must be meaningful: coarse types are lossy, so a zero error would mean the test
    // compared a buffer with itself.
    if (traits(t).quantized) {
      EXPECT_GT(rel, rmse_bound(t) / 10) << dtype_name(t) << " n=" << n;
    }
  }
}

TEST_P(QuantParity, ZeroRowsRoundTripToZero) {
  const DType t = GetParam();
  const int64_t n = 3 * traits(t).block_size;
  const std::vector<float> x(static_cast<size_t>(n), 0.0f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const auto y = test::dequantize(t, test::quantize(t, x, isa), n, isa);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << dtype_name(t) << " i=" << i;
  }
}

TEST_P(QuantParity, Avx2DequantizeIsIdentical) {
  if (!have_avx2()) GTEST_SKIP() << "CPU has no AVX2/FMA/F16C";
  const DType t = GetParam();
  for (int64_t n : test_sizes(t)) {
    for (int r = 0; r < kRows; ++r) {
      // Both arbitrary bit patterns and the output of our own quantizer.
      const std::vector<std::vector<uint8_t>> inputs = {
          random_blocks(t, n, 200 + r), test::quantize(t, random_floats(n, 300 + r), Isa::kScalar)};
      for (const auto& q : inputs) {
        const auto a = test::dequantize(t, q, n, Isa::kScalar);
        const auto b = test::dequantize(t, q, n, Isa::kAvx2);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(test::same_float(a[i], b[i]))
              << dtype_name(t) << " n=" << n << " i=" << i << ": " << a[i] << " vs " << b[i];
      }
    }
  }
}

TEST_P(QuantParity, Avx2QuantizeIsIdentical) {
  if (!have_avx2()) GTEST_SKIP() << "CPU has no AVX2/FMA/F16C";
  const DType t = GetParam();
  for (int64_t n : test_sizes(t)) {
    for (int r = 0; r < kRows; ++r) {
      auto x = random_floats(n, 400 + r);
      // Values on exact rounding ties (after scaling) for the 8-bit quantizers: 127 sets the
      // Q8_0 scale to 1, so the others are rounded as they are.
      if (n >= 32 && r == 0) {
        x[0] = 127.0f;
        for (int i = 1; i < 32; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * (i / 2 + 0.5f);
      }
      EXPECT_EQ(test::quantize(t, x, Isa::kScalar), test::quantize(t, x, Isa::kAvx2))
          << dtype_name(t) << " n=" << n << " row " << r;
    }
  }
}

// Weights as random bit patterns and as quantized data; activations quantized to the dot type.
struct DotCase {
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<uint8_t> xq;
};
std::vector<DotCase> dot_cases(DType t, int64_t n) {
  const DType dt = cpu::vec_dot_type(t);
  std::vector<DotCase> cases;
  for (int r = 0; r < kRows; ++r) {
    DotCase c;
    c.w = r == 0 ? random_blocks(t, n, 500 + r)
                 : test::quantize(t, random_floats(n, 600 + r), Isa::kScalar);
    c.x = random_floats(n, 700 + r, 0.5f);
    c.xq = test::quantize(dt, c.x, Isa::kScalar);
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST_P(QuantParity, Avx2VecDotMatchesScalar) {
  if (!have_avx2()) GTEST_SKIP() << "CPU has no AVX2/FMA/F16C";
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  for (int64_t n : test_sizes(t)) {
    for (const DotCase& c : dot_cases(t, n)) {
      const auto wd = test::dequantize(t, c.w, n, Isa::kScalar);
      const auto xd = test::dequantize(dt, c.xq, n, Isa::kScalar);
      const double scale = test::dot_ref(wd.data(), xd.data(), n).abs;
      const float a = cpu::kernels(t, Isa::kScalar).vec_dot(n, c.w.data(), c.xq.data());
      const float b = cpu::kernels(t, Isa::kAvx2).vec_dot(n, c.w.data(), c.xq.data());
      EXPECT_NEAR(a, b, 1e-5 * scale + 1e-30) << dtype_name(t) << " n=" << n;
    }
  }
}

// Q8_1 activations carry s = d * sum(q) rounded to f16, which the Q4_1/Q5_1 dots multiply by the
// weight block's m: allow that rounding (half an f16 ulp of |m * s| per block) on top.
double q8_1_sum_rounding(DType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& xq,
                         int64_t n) {
  if (cpu::vec_dot_type(t) != DType::kQ8_1) return 0.0;
  const size_t wb = traits(t).block_bytes, xb = traits(DType::kQ8_1).block_bytes;
  double s = 0.0;
  for (int64_t i = 0; i < n / 32; ++i) {
    const uint16_t m = static_cast<uint16_t>(w[i * wb + 2] | (w[i * wb + 3] << 8));
    const uint16_t sx = static_cast<uint16_t>(xq[i * xb + 2] | (xq[i * xb + 3] << 8));
    s += std::fabs(static_cast<double>(f16_to_f32(m)) * f16_to_f32(sx)) * 0x1p-11;
  }
  return s;
}

TEST_P(QuantParity, VecDotMatchesDoubleDotOfDequantized) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    for (int64_t n : test_sizes(t)) {
      for (const DotCase& c : dot_cases(t, n)) {
        const auto wd = test::dequantize(t, c.w, n, Isa::kScalar);
        const auto xd = test::dequantize(dt, c.xq, n, Isa::kScalar);
        const test::DotRef ref = test::dot_ref(wd.data(), xd.data(), n);
        const float got = cpu::kernels(t, isa).vec_dot(n, c.w.data(), c.xq.data());
        // Block sums are exact integers; only the f32 scaling and accumulation round.
        EXPECT_NEAR(got, ref.dot, 1e-5 * ref.abs + q8_1_sum_rounding(t, c.w, c.xq, n) + 1e-30)
            << dtype_name(t) << " isa=" << static_cast<int>(isa) << " n=" << n;
      }
    }
  }
}

TEST_P(QuantParity, VecDotMatchesFloatActivations) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  // Converting activations to an 8-bit type costs under 1% of |w||x| (Cauchy-Schwarz with the
  // activation RMSE); f32 activations are exact up to summation.
  const double tol = dt == DType::kF32 ? 1e-6 : 0.01;
  for (int64_t n : test_sizes(t)) {
    for (const DotCase& c : dot_cases(t, n)) {
      const auto wd = test::dequantize(t, c.w, n);
      const double ref = test::dot_ref(wd.data(), c.x.data(), n).dot;
      const double bound = tol * test::norm2(wd.data(), n) * test::norm2(c.x.data(), n);
      EXPECT_NEAR(cpu::vec_dot(t, n, c.w.data(), c.xq.data()), ref, bound)
          << dtype_name(t) << " n=" << n;
    }
  }
}

// The multi-row kernels must give each row exactly what vec_dot gives it alone.
TEST_P(QuantParity, VecDotRowsMatchesVecDotExactly) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const cpu::TypeKernels& k = cpu::kernels(t, isa);
    if (k.vec_dot_rows == nullptr) continue;
    for (int64_t n : test_sizes(t)) {
      const auto w = test::quantize(t, random_floats(n, 900), isa);
      const size_t xs = row_bytes(dt, n);
      std::vector<uint8_t> x(xs * cpu::kMaxDotRows);
      for (int j = 0; j < cpu::kMaxDotRows; ++j) {
        const auto xf = random_floats(n, 910 + j);
        cpu::kernels(dt, isa).quantize(xf.data(), x.data() + j * xs, n);
      }
      for (int nx = 1; nx <= cpu::kMaxDotRows; ++nx) {
        float out[cpu::kMaxDotRows];
        k.vec_dot_rows(n, w.data(), x.data(), xs, nx, out);
        for (int j = 0; j < nx; ++j)
          EXPECT_EQ(out[j], k.vec_dot(n, w.data(), x.data() + j * xs))
              << dtype_name(t) << " n=" << n << " nx=" << nx << " row " << j;
      }
    }
  }
}

// The decode kernels (one activation row, several weight rows) must give each weight row exactly
// what vec_dot gives it alone, for every row count and at the odd sizes.
TEST_P(QuantParity, VecDotWRowsMatchesVecDotExactly) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const cpu::TypeKernels& k = cpu::kernels(t, isa);
    if (k.vec_dot_wrows == nullptr) continue;
    for (int64_t n : test_sizes(t)) {
      // F32 rows outside [256, 512) go in four-row passes: QuantParityF32 below.
      if (t == DType::kF32 && isa == Isa::kAvx2 && (n < 256 || n >= 512)) continue;
      const size_t ws = row_bytes(t, n);
      std::vector<uint8_t> w(ws * cpu::kMaxWeightRows);
      for (int r = 0; r < cpu::kMaxWeightRows; ++r) {
        const auto q = test::quantize(t, random_floats(n, 920 + r), isa);
        std::copy(q.begin(), q.end(), w.begin() + static_cast<std::ptrdiff_t>(r * ws));
      }
      std::vector<uint8_t> x(row_bytes(dt, n));
      const auto xf = random_floats(n, 930);
      cpu::kernels(dt, isa).quantize(xf.data(), x.data(), n);
      for (int nr = 1; nr <= cpu::kMaxWeightRows; ++nr) {
        float out[cpu::kMaxWeightRows];
        k.vec_dot_wrows(n, w.data(), ws, x.data(), nr, out);
        for (int r = 0; r < nr; ++r)
          EXPECT_EQ(out[r], k.vec_dot(n, w.data() + r * ws, x.data()))
              << dtype_name(t) << " n=" << n << " nr=" << nr << " row " << r;
      }
    }
  }
}

// F32 rows under 256 values are decoded in four-row passes (one accumulator per row): equal to
// vec_dot to f32 rounding; rows of 256 and more one at a time through vec_dot itself: equal bit
// for bit. At the sizes around the switch and with tails.
TEST(QuantParityF32, LongRowDecodeMatchesVecDot) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const cpu::TypeKernels& k = cpu::kernels(DType::kF32, isa);
    if (k.vec_dot_wrows == nullptr) continue;
    for (int64_t n : {1, 37, 64, 172, 255, 256, 504, 511, 512, 768, 1029}) {
      const size_t ws = row_bytes(DType::kF32, n);
      std::vector<uint8_t> w(ws * cpu::kMaxWeightRows);
      for (int r = 0; r < cpu::kMaxWeightRows; ++r) {
        const auto f = random_floats(n, 940 + r);
        std::memcpy(w.data() + r * ws, f.data(), ws);
      }
      const auto xf = random_floats(n, 950);
      for (int nr = 1; nr <= cpu::kMaxWeightRows; ++nr) {
        float out[cpu::kMaxWeightRows];
        k.vec_dot_wrows(n, w.data(), ws, xf.data(), nr, out);
        for (int r = 0; r < nr; ++r) {
          const float want = k.vec_dot(n, w.data() + r * ws, xf.data());
          if (isa == Isa::kAvx2 && n >= 256)
            EXPECT_EQ(out[r], want) << "n=" << n << " nr=" << nr << " row " << r;
          else
            EXPECT_NEAR(out[r], want, 1e-5 * (1.0 + std::sqrt(static_cast<double>(n))))
                << "n=" << n << " nr=" << nr << " row " << r;
        }
      }
    }
  }
}

// Short F32 rows go in eight-row passes where eight rows remain, then four-row ones: a row's
// result must be the same bits in either pass (and in the eight-row pass's stored tail), at
// stories260K's row lengths and with tails.
TEST(QuantParityF32, EightRowPassGivesTheFourRowPassBits) {
  if (!cpu::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int64_t n : {1, 7, 8, 37, 64, 172, 255}) {
    const int64_t stride = n + 3;  // rows apart by more than their length
    const auto w = random_floats(8 * stride, 960);
    const auto x = random_floats(n, 961);
    float eight[8], four[8];
    cpu::dot8_f32_avx2(n, w.data(), stride, x.data(), eight);
    cpu::dot4_f32_avx2(n, w.data(), stride, x.data(), four);
    cpu::dot4_f32_avx2(n, w.data() + 4 * stride, stride, x.data(), four + 4);
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(eight[r], four[r]) << "n=" << n << " row " << r;
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += double(w[r * stride + i]) * x[i];
      EXPECT_NEAR(eight[r], want, 1e-5 * (1.0 + std::sqrt(double(n)))) << "n=" << n << " row " << r;
    }
  }
}

// The batched-decode kernels (nr weight rows x nx tokens) must give each (row, token) exactly what
// vec_dot gives it alone, for every shape up to the maximum (so every tail of the kernel's passes
// is covered), and write nothing outside the nr x nx block of the output.
TEST_P(QuantParity, VecDotTileMatchesVecDotExactly) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  constexpr int kR = cpu::kMaxTileRows, kT = cpu::kMaxTileTokens;
  constexpr size_t kYs = kR + 3;  // output row stride wider than any nr
  constexpr float kUntouched = -12345.0f;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const cpu::TypeKernels& k = cpu::kernels(t, isa);
    if (k.vec_dot_tile == nullptr) continue;
    for (int64_t n : test_sizes(t)) {
      const size_t ws = row_bytes(t, n), xs = row_bytes(dt, n);
      std::vector<uint8_t> w(ws * kR), x(xs * kT);
      for (int r = 0; r < kR; ++r) {
        const auto q = test::quantize(t, random_floats(n, 940 + r), isa);
        std::copy(q.begin(), q.end(), w.begin() + static_cast<std::ptrdiff_t>(r * ws));
      }
      for (int j = 0; j < kT; ++j) {
        const auto xf = random_floats(n, 960 + j);
        cpu::kernels(dt, isa).quantize(xf.data(), x.data() + j * xs, n);
      }
      for (int nr = 1; nr <= kR; ++nr) {
        for (int nx = 1; nx <= kT; ++nx) {
          std::vector<float> y(kYs * (kT + 1), kUntouched);
          k.vec_dot_tile(n, w.data(), ws, x.data(), xs, nr, nx, y.data(), kYs);
          for (int j = 0; j <= kT; ++j) {
            for (size_t r = 0; r < kYs; ++r) {
              const float got = y[j * kYs + r];
              if (j < nx && static_cast<int>(r) < nr) {
                EXPECT_EQ(got, k.vec_dot(n, w.data() + r * ws, x.data() + j * xs))
                    << dtype_name(t) << " n=" << n << " nr=" << nr << " nx=" << nx << " row " << r
                    << " token " << j;
              } else {
                EXPECT_EQ(got, kUntouched) << "wrote outside the tile: nr=" << nr << " nx=" << nx;
              }
            }
          }
        }
      }
    }
  }
}

// Extreme codes: every weight code 0 or 15 and every activation code +-127 make the Q4_0 block sums
// as large as they get (|32 * 8 * 127| = 32512), which the decode kernel's int16 partial sums must
// carry without saturating. With d = 1 the expected dot is an exact integer.
TEST(QuantParityExtreme, Q4_0DecodeKernelLargestBlockSums) {
  if (!cpu::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  constexpr int64_t kN = 64;  // two blocks
  constexpr int kRowsN = 8;
  const size_t ws = row_bytes(DType::kQ4_0, kN), xs = row_bytes(DType::kQ8_0, kN);
  for (int w_code : {0x00, 0xFF}) {
    for (int y_code : {127, -127}) {
      std::vector<uint8_t> w(ws * kRowsN), x(xs);
      for (int64_t b = 0; b < kN / 32 * kRowsN; ++b) {
        w[b * 18] = 0x00, w[b * 18 + 1] = 0x3C;  // d = 1.0 (f16)
        for (int i = 0; i < 16; ++i) w[b * 18 + 2 + i] = static_cast<uint8_t>(w_code);
      }
      for (int64_t b = 0; b < kN / 32; ++b) {
        x[b * 34] = 0x00, x[b * 34 + 1] = 0x3C;
        for (int i = 0; i < 32; ++i) x[b * 34 + 2 + i] = static_cast<uint8_t>(y_code);
      }
      const float expect = static_cast<float>(kN * ((w_code & 0xF) - 8) * y_code);
      const cpu::TypeKernels& k = cpu::kernels(DType::kQ4_0, Isa::kAvx2);
      float out[kRowsN];
      k.vec_dot_wrows(kN, w.data(), ws, x.data(), kRowsN, out);
      for (int r = 0; r < kRowsN; ++r) EXPECT_EQ(out[r], expect) << "row " << r;
      EXPECT_EQ(k.vec_dot(kN, w.data(), x.data()), expect);
      EXPECT_EQ(cpu::kernels(DType::kQ4_0, Isa::kScalar).vec_dot(kN, w.data(), x.data()), expect);
    }
  }
}

TEST_P(QuantParity, EntryPointsUseActiveKernels) {
  const DType t = GetParam();
  const int64_t n = 3 * traits(t).block_size;
  const auto x = random_floats(n, 800);
  std::vector<uint8_t> q(row_bytes(t, n));
  cpu::quantize_row(t, x.data(), q.data(), n);
  EXPECT_EQ(q, test::quantize(t, x));
  std::vector<float> y(static_cast<size_t>(n));
  cpu::dequantize_row(t, q.data(), y.data(), n);
  EXPECT_EQ(y, test::dequantize(t, q, n));
  if (traits(t).block_size > 1) {
    EXPECT_THROW(cpu::quantize_row(t, x.data(), q.data(), n - 1), Error);
    EXPECT_THROW(cpu::dequantize_row(t, q.data(), y.data(), n + 1), Error);
    EXPECT_THROW(cpu::vec_dot(t, n - 1, q.data(), q.data()), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantParity, ::testing::ValuesIn(test::computable_dtypes()),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return test::dtype_test_name(p.param);
                         });

TEST(QuantDispatch, VecDotTypes) {
  const std::map<DType, DType> expected = {
      {DType::kF32, DType::kF32},   {DType::kF16, DType::kF32},   {DType::kBF16, DType::kF32},
      {DType::kQ4_0, DType::kQ8_0}, {DType::kQ5_0, DType::kQ8_0}, {DType::kQ8_0, DType::kQ8_0},
      {DType::kQ8_1, DType::kQ8_0}, {DType::kQ4_1, DType::kQ8_1}, {DType::kQ5_1, DType::kQ8_1},
      {DType::kQ2_K, DType::kQ8_K}, {DType::kQ3_K, DType::kQ8_K}, {DType::kQ4_K, DType::kQ8_K},
      {DType::kQ5_K, DType::kQ8_K}, {DType::kQ6_K, DType::kQ8_K}, {DType::kQ8_K, DType::kQ8_K},
  };
  for (const auto& [w, a] : expected) EXPECT_EQ(cpu::vec_dot_type(w), a) << dtype_name(w);
}

TEST(QuantDispatch, UnsupportedTypesThrow) {
  for (DType t : {DType::kI8, DType::kI16, DType::kF64}) {
    EXPECT_FALSE(cpu::has_kernels(t));
    EXPECT_THROW(cpu::vec_dot_type(t), Error) << dtype_name(t);
  }
  try {
    cpu::kernels(DType::kI16);
    FAIL() << "expected nexus::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("I16"), std::string::npos) << e.what();
  }
}

TEST(QuantDispatch, ActiveIsaFollowsCpuAndEnvironment) {
  const char* env = std::getenv("NEXUS_FORCE_SCALAR");
  const bool forced = env != nullptr && std::string(env) == "1";
  const Isa want = !forced && cpu::isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
  EXPECT_EQ(cpu::active_isa(), want);
  EXPECT_TRUE(cpu::isa_supported(Isa::kScalar));
}

}  // namespace
}  // namespace nexus
