// F16 and BF16 conversions: round to nearest even, subnormals, overflow, inf and NaN, for the
// scalar reference (nexus::f32_to_f16 & co.) and the F16C/AVX2 row converters. F16C hardware is an
// independent oracle for f16 rounding; bf16 is checked against a slow double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "parity/quant_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t f16_row(float f, Isa isa) {
  uint16_t h;
  cpu::kernels(DType::kF16, isa).quantize(&f, &h, 1);
  return h;
}

TEST(HalfConvert, F16SpecialValues) {
  struct Case {
    float f;
    uint16_t h;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {65504.0f, 0x7BFF},   // largest finite
      {65519.99f, 0x7BFF},  // below the halfway point to 65536
      {65520.0f, 0x7C00},   // halfway: ties to even = inf
      {std::numeric_limits<float>::infinity(), 0x7C00},
      {-std::numeric_limits<float>::infinity(), 0xFC00},
      {1.0f + 0x1p-11f, 0x3C00},             // tie between 1 and 1+2^-10: even is 1
      {1.0f + 3 * 0x1p-11f, 0x3C02},         // tie between 1+2^-10 and 1+2^-9: even is up
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},  // just above the tie
      {0x1p-14f, 0x0400},                    // smallest normal
      {0x1p-24f, 0x0001},                    // smallest subnormal
      {0x1p-25f, 0x0000},                    // tie between 0 and 2^-24: even is 0
      {3 * 0x1p-25f, 0x0002},                // tie between 1 and 2 subnormal ulps: 2
      {0x1p-25f + 0x1p-40f, 0x0001},         // just above the tie
      {0x1p-14f - 0x1p-25f, 0x0400},         // rounds up into the normal range
      {1e-10f, 0x0000},
  };
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    for (const Case& c : cases)
      EXPECT_EQ(f16_row(c.f, isa), c.h) << "isa=" << static_cast<int>(isa) << " f=" << c.f;
  }
  for (const Case& c : cases) EXPECT_EQ(f32_to_f16(c.f), c.h) << c.f;
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

// Every f16 bit pattern widens exactly and narrows back to itself (NaN stays NaN).
TEST(HalfConvert, F16AllPatternsRoundTrip) {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const auto& k = cpu::kernels(DType::kF16, isa);
    std::vector<float> f(65536);
    std::vector<uint16_t> back(65536);
    k.dequantize(all.data(), f.data(), 65536);
    k.quantize(f.data(), back.data(), 65536);
    for (int i = 0; i < 65536; ++i) {
      const bool is_nan = (i & 0x7C00) == 0x7C00 && (i & 0x3FF) != 0;
      if (is_nan) {
        ASSERT_TRUE(std::isnan(f[i])) << std::hex << i;
        ASSERT_EQ(back[i] & 0x7C00, 0x7C00) << std::hex << i;
        ASSERT_NE(back[i] & 0x3FF, 0) << std::hex << i;
      } else {
        ASSERT_EQ(back[i], all[i])
            << "isa=" << static_cast<int>(isa) << " pattern " << std::hex << i;
        ASSERT_TRUE(test::same_float(f[i], f16_to_f32(all[i]))) << std::hex << i;
      }
    }
  }
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x03FF), 0x3FFp-24f);
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
}

// Random f32 bit patterns: the scalar narrowing must agree with the F16C instruction.
TEST(HalfConvert, F16ScalarMatchesHardware) {
  if (!cpu::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU has no F16C";
  std::mt19937 rng(42);
  constexpr int kN = 1 << 18;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) {
    // Half the samples near the f16 range (exponents 100..150) where rounding is interesting.
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807FFFFFu) | ((100u + rng() % 51) << 23);
    x[i] = from_bits(u);
  }
  std::vector<uint16_t> a(kN), b(kN);
  cpu::kernels(DType::kF16, Isa::kScalar).quantize(x.data(), a.data(), kN);
  cpu::kernels(DType::kF16, Isa::kAvx2).quantize(x.data(), b.data(), kN);
  for (int i = 0; i < kN; ++i) {
    if (std::isnan(x[i])) continue;
    ASSERT_EQ(a[i], b[i]) << "f32 bits " << std::hex << to_bits(x[i]);
  }
}

// Slow bf16 reference: the nearer of the two bf16 neighbours in double, ties to even mantissa.
uint16_t bf16_reference(float f) {
  const uint32_t u = to_bits(f);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const uint32_t lo = u & 0xFFFF0000u;
  const uint32_t hi = lo + 0x10000u;  // next bf16 away from zero (may carry into the exponent)
  const double dl = std::fabs(static_cast<double>(from_bits(lo)) - f);
  const double dh =
      (hi & 0x7FFFFFFFu) >= 0x7F800000u
          ? std::fabs(std::ldexp(1.0, 128) - std::fabs(static_cast<double>(f)))  // inf: 2^128
          : std::fabs(static_cast<double>(from_bits(hi)) - f);
  if (dl < dh || (dl == dh && ((lo >> 16) & 1) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}

TEST(HalfConvert, Bf16RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::vector<float> x;
  for (int i = 0; i < (1 << 16); ++i) {
    const float f = from_bits(rng());
    if (!std::isnan(f)) x.push_back(f);
  }
  for (float f : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-130f, 0x1.FFFFFEp127f, -0.0f,
                  std::numeric_limits<float>::infinity()})
    x.push_back(f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    std::vector<uint16_t> h(x.size());
    cpu::kernels(DType::kBF16, isa).quantize(x.data(), h.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(h[i], bf16_reference(x[i]))
          << "isa=" << static_cast<int>(isa) << " f32 bits " << std::hex << to_bits(x[i]);
  }
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);      // tie: even is 1.0
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);  // tie: even is up
  EXPECT_EQ(f32_to_bf16(0x1.FFFFFEp127f), 0x7F80);     // largest float rounds to inf
}

TEST(HalfConvert, Bf16NanStaysQuietNan) {
  const float snan = from_bits(0x7F800001u);  // signalling NaN whose payload is in the low bits
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    uint16_t h;
    cpu::kernels(DType::kBF16, isa).quantize(&snan, &h, 1);
    EXPECT_EQ(h, 0x7FC0) << "isa=" << static_cast<int>(isa);
    float back;
    cpu::kernels(DType::kBF16, isa).dequantize(&h, &back, 1);
    EXPECT_TRUE(std::isnan(back));
  }
}

}  // namespace
}  // namespace nexus
