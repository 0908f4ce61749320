// Mixed-precision rounding kernels: AVX2/F16C against the scalar reference (bit for bit, NaN as
// NaN), hand-computed round-to-nearest-even cases, and the loss scaler's rules.
#include "nexus/train/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/round.h"
#include "ops/round.h"
#include "backends/cpu/quant.h"
#include "test_random.h"

namespace nexus::train {
namespace {

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

// Values across the ranges that matter: normal activations, tiny gradients (fp16 subnormals and
// underflow), huge values (fp16 overflow), ties, infinities and NaN; 203 values, not a multiple
// of 8, so the tails run too.
std::vector<float> inputs() {
  std::vector<float> v = test::randn(120, 5);
  for (float x : test::randn(40, 6, 1e-6f)) v.push_back(x);
  for (float x : test::randn(30, 7, 1e5f)) v.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::nanf(""), 65504.0f, 65520.0f, 65519.0f, 1e-8f,
                  std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), 1.0f + std::ldexp(1.0f, -8),
                  1.0f + std::ldexp(3.0f, -8)})
    v.push_back(x);
  return v;
}

class PrecisionParity : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  }
};

TEST_P(PrecisionParity, Avx2RoundsLikeTheScalarReference) {
  const Precision p = GetParam();
  const std::vector<float> x = inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> want(n), got(n), xs = x, xa = x;
  std::vector<uint16_t> hs(n), ha(n);
  cpu::round_scalar(p, x.data(), want.data(), n);
  cpu::round_avx2(p, x.data(), got.data(), n);
  cpu::round_pack_scalar(p, xs.data(), hs.data(), n);
  cpu::round_pack_avx2(p, xa.data(), ha.data(), n);
  std::vector<float> back(n);
  cpu::unpack_avx2(p, ha.data(), back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(want[i], got[i])) << i << ": " << x[i] << " -> " << want[i] << " vs " << got[i];
    ASSERT_TRUE(same(want[i], xa[i])) << i;
    ASSERT_TRUE(same(want[i], xs[i])) << i;
    ASSERT_TRUE(same(want[i], back[i])) << i;
    if (!std::isnan(x[i])) {
      ASSERT_EQ(hs[i], ha[i]) << i << ": " << x[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PrecisionParity,
                         ::testing::Values(Precision::kBF16, Precision::kF16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

float rounded(Precision p, float x) {
  round_to(p, &x, 1);
  return x;
}

TEST(Precision, RoundsToNearestEven) {
  const float inf = std::numeric_limits<float>::infinity();
  // bf16 keeps 7 fraction bits: 1 + 2^-8 is halfway and goes to the even 1; 1 + 3 * 2^-8 is
  // halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(rounded(Precision::kBF16, 1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(rounded(Precision::kBF16, 1.0f + std::ldexp(3.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(rounded(Precision::kBF16, 3.0e38f), 3.00405527e38f);  // bf16 spans f32's range
  // fp16: 10 fraction bits, largest finite 65504, smallest subnormal 2^-24.
  EXPECT_EQ(rounded(Precision::kF16, 1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(rounded(Precision::kF16, 65519.0f), 65504.0f);
  EXPECT_EQ(rounded(Precision::kF16, 65520.0f), inf);
  EXPECT_EQ(rounded(Precision::kF16, std::ldexp(1.0f, -25)), 0.0f);  // tie to even zero
  EXPECT_EQ(rounded(Precision::kF16, std::ldexp(1.5f, -25)), std::ldexp(1.0f, -24));
  EXPECT_EQ(rounded(Precision::kF32, 1.0f + std::ldexp(1.0f, -20)), 1.0f + std::ldexp(1.0f, -20));
  EXPECT_TRUE(std::isnan(rounded(Precision::kBF16, std::nanf(""))));
}

TEST(Precision, ParsesNames) {
  EXPECT_EQ(parse_precision("BF16").value(), Precision::kBF16);
  EXPECT_EQ(parse_precision("fp16").value(), Precision::kF16);
  EXPECT_EQ(parse_precision("f32").value(), Precision::kF32);
  auto bad = parse_precision("f8");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("f8"), std::string::npos);
}

TEST(LossScaler, FollowsTheDynamicRules) {
  LossScaler s;  // 65536, x2 after 2000 finite steps, x0.5 and skip on a non-finite one
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0f);
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_TRUE(s.update(true));  // the 2000th finite step in a row
  EXPECT_EQ(s.scale(), 65536.0f);
  for (int i = 0; i < 1500; ++i) s.update(true);
  EXPECT_FALSE(s.update(false));  // an overflow resets the count
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
  LossScaler fixed({.init = 128.0f, .dynamic = false});
  EXPECT_FALSE(fixed.update(false));
  EXPECT_EQ(fixed.scale(), 128.0f);
}

}  // namespace
}  // namespace nexus::train
