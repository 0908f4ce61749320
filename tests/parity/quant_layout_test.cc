// Bit-exactness of the ggml block layouts: blocks built byte by byte from the documented layout
// must dequantize to exactly the expected values (scalar and AVX2), and the Q4_0..Q8_1 quantizers
// must follow ggml's reference rounding rules (truncating casts, round-half-away, -0 scales).
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "parity/quant_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;

// Dequantizes one block of t on every ISA the CPU has and checks each value exactly.
void expect_dequant(DType t, const std::vector<uint8_t>& block, const std::vector<float>& want) {
  ASSERT_EQ(block.size(), traits(t).block_bytes);
  const int64_t n = traits(t).block_size;
  ASSERT_EQ(static_cast<int64_t>(want.size()), n);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const auto got = test::dequantize(t, block, n, isa);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " isa=" << static_cast<int>(isa) << " element "
                                 << i;
  }
}

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xFF);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

TEST(QuantLayout, Q4_0HandBuilt) {
  // d = 0.5 (f16 0x3800, little endian), then 16 bytes: low nibble = element j, high = j + 16.
  std::vector<uint8_t> b = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = (j - 8) * 0.5f;
    want[j + 16] = (15 - j - 8) * 0.5f;
  }
  expect_dequant(DType::kQ4_0, b, want);
  EXPECT_EQ(want[0], -4.0f);  // the documented extremes: code 0 -> -8d, code 15 -> 7d
  EXPECT_EQ(want[16], 3.5f);
}

TEST(QuantLayout, Q4_1HandBuilt) {
  std::vector<uint8_t> b = {0x00, 0x34, 0x00, 0xBC};  // d = 0.25, m = -1
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(((3 * j) & 0xF) | (j << 4)));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = ((3 * j) & 0xF) * 0.25f - 1.0f;
    want[j + 16] = j * 0.25f - 1.0f;
  }
  expect_dequant(DType::kQ4_1, b, want);
}

TEST(QuantLayout, Q5_0AndQ5_1HandBuilt) {
  const uint32_t qh = 0xA5C3F00Fu;                     // bit j is the fifth bit of element j
  std::vector<uint8_t> b0 = {0x00, 0x38};              // d = 0.5
  std::vector<uint8_t> b1 = {0x00, 0x38, 0x00, 0x40};  // d = 0.5, m = 2
  for (int k = 0; k < 4; ++k) {
    b0.push_back(static_cast<uint8_t>(qh >> (8 * k)));
    b1.push_back(static_cast<uint8_t>(qh >> (8 * k)));
  }
  std::vector<float> want0(32), want1(32);
  for (int j = 0; j < 16; ++j) {
    const int lo = (5 * j + 1) & 0xF, hi = (7 * j + 2) & 0xF;
    b0.push_back(static_cast<uint8_t>(lo | (hi << 4)));
    b1.push_back(static_cast<uint8_t>(lo | (hi << 4)));
    const int c0 = lo + 16 * ((qh >> j) & 1), c1 = hi + 16 * ((qh >> (j + 16)) & 1);
    want0[j] = (c0 - 16) * 0.5f;
    want0[j + 16] = (c1 - 16) * 0.5f;
    want1[j] = c0 * 0.5f + 2.0f;
    want1[j + 16] = c1 * 0.5f + 2.0f;
  }
  expect_dequant(DType::kQ5_0, b0, want0);
  expect_dequant(DType::kQ5_1, b1, want1);
}

TEST(QuantLayout, Q8_0AndQ8_KHandBuilt) {
  std::vector<uint8_t> b = {0x00, 0x38};  // d = 0.5
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j) {
    b.push_back(static_cast<uint8_t>(static_cast<int8_t>(8 * j - 128)));
    want[j] = 0.5f * (8 * j - 128);
  }
  expect_dequant(DType::kQ8_0, b, want);

  std::vector<uint8_t> k(292, 0);
  const float d = -0.125f;  // Q8_K keeps a full f32 scale
  std::memcpy(k.data(), &d, 4);
  std::vector<float> wantk(256);
  for (int j = 0; j < 256; ++j) {
    k[4 + j] = static_cast<uint8_t>(j);  // int8 codes -128..127 in two's complement
    wantk[j] = d * static_cast<int8_t>(j);
  }
  expect_dequant(DType::kQ8_K, k, wantk);
}

// Scales and mins of the 8 sub-blocks used by the Q4_K/Q5_K tests, with their 12 packed bytes
// worked out by hand from the layout: bytes 0-3 = sc[0..3] | (sc[4..7] >> 4) << 6, bytes 4-7 =
// m[0..3] | (m[4..7] >> 4) << 6, bytes 8-11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4.
constexpr std::array<int, 8> kSc = {1, 2, 3, 63, 17, 33, 48, 5};
constexpr std::array<int, 8> kMin = {0, 7, 63, 1, 20, 40, 9, 62};
constexpr std::array<uint8_t, 12> kPacked = {0x41, 0x82, 0xC3, 0x3F, 0x40, 0x87,
                                             0x3F, 0xC1, 0x41, 0x81, 0x90, 0xE5};

TEST(QuantLayout, KScalePackingMatchesHandPacked) {
  uint8_t sc[8], m[8], packed[12];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(kSc[j]);
    m[j] = static_cast<uint8_t>(kMin[j]);
  }
  cpu::pack_scales_mins_k4(sc, m, packed);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(packed[i], kPacked[i]) << "byte " << i;
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    cpu::unpack_scale_min_k4(j, kPacked.data(), &s, &mm);
    EXPECT_EQ(s, kSc[j]) << j;
    EXPECT_EQ(mm, kMin[j]) << j;
  }
}

TEST(QuantLayout, Q4_KHandBuilt) {
  std::vector<uint8_t> b(144, 0);
  put_u16(b, 0, 0x3C00);  // d = 1
  put_u16(b, 2, 0x3800);  // dmin = 0.5
  std::memcpy(&b[4], kPacked.data(), 12);
  std::vector<float> want(256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = (l + c) & 0xF, hi = (3 * l + c) & 0xF;
      b[16 + 32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
      want[64 * c + l] = 1.0f * kSc[2 * c] * lo - 0.5f * kMin[2 * c];
      want[64 * c + 32 + l] = 1.0f * kSc[2 * c + 1] * hi - 0.5f * kMin[2 * c + 1];
    }
  }
  expect_dequant(DType::kQ4_K, b, want);
}

TEST(QuantLayout, Q5_KHandBuilt) {
  std::vector<uint8_t> b(176, 0);
  put_u16(b, 0, 0x3800);  // d = 0.5
  put_u16(b, 2, 0x3C00);  // dmin = 1
  std::memcpy(&b[4], kPacked.data(), 12);
  std::vector<float> want(256);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(37 * l + 11);  // qh
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = (l + 2 * c) & 0xF, hi = (5 * l + c) & 0xF;
      b[48 + 32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
      const int qh = b[16 + l];
      const int c0 = lo + 16 * ((qh >> (2 * c)) & 1), c1 = hi + 16 * ((qh >> (2 * c + 1)) & 1);
      want[64 * c + l] = 0.5f * kSc[2 * c] * c0 - 1.0f * kMin[2 * c];
      want[64 * c + 32 + l] = 0.5f * kSc[2 * c + 1] * c1 - 1.0f * kMin[2 * c + 1];
    }
  }
  expect_dequant(DType::kQ5_K, b, want);
}

TEST(QuantLayout, Q6_KHandBuilt) {
  constexpr std::array<int, 16> kScales = {-128, -7,  0, 1,  5,   127, -1, 3,
                                           9,    -20, 2, 64, -64, 8,   11, -3};
  std::vector<uint8_t> b(210, 0);
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (7 * e + 3) % 64;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 64; ++l)
      b[64 * h + l] =
          static_cast<uint8_t>((q[128 * h + l] & 0xF) | ((q[128 * h + 64 + l] & 0xF) << 4));
    for (int l = 0; l < 32; ++l) {
      const int* g = q + 128 * h + l;
      b[128 + 32 * h + l] = static_cast<uint8_t>((g[0] >> 4) | ((g[32] >> 4) << 2) |
                                                 ((g[64] >> 4) << 4) | ((g[96] >> 4) << 6));
    }
  }
  for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(kScales[j]));
  put_u16(b, 208, 0x3400);  // d = 0.25
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.25f * kScales[e / 16] * (q[e] - 32);
  expect_dequant(DType::kQ6_K, b, want);

  // A few single bytes with literal expectations: element 0 takes the low nibble of ql[0] and
  // bits 0-1 of qh[0]; element 64 the high nibble of ql[0] and bits 4-5 of qh[0].
  std::vector<uint8_t> s(210, 0);
  s[0] = 0x05;
  s[128] = 0x12;            // qh[0]: bits 0-1 = 2, bits 4-5 = 1
  s[192] = 1;               // scale of elements 0-15
  s[192 + 4] = 2;           // scale of elements 64-79
  put_u16(s, 208, 0x3C00);  // d = 1
  const auto y = test::dequantize(DType::kQ6_K, s, 256, Isa::kScalar);
  EXPECT_EQ(y[0], 1.0f * (5 + 32 - 32));
  EXPECT_EQ(y[64], 2.0f * (0 + 16 - 32));
  EXPECT_EQ(y[1], 1.0f * (0 - 32));
}

// ---- ggml reference rounding of the legacy quantizers ----

std::vector<uint8_t> quantize_block(DType t, const std::vector<float>& x, Isa isa = Isa::kScalar) {
  return test::quantize(t, x, isa);
}

TEST(QuantRounding, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  const float v[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -127.0f, 0.49999997f};
  const int8_t want[] = {127, 1, 2, 3, -1, -2, -3, 127, -127, 0};
  std::copy(std::begin(v), std::end(v), x.begin());
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!cpu::isa_supported(isa)) continue;
    for (DType t : {DType::kQ8_0, DType::kQ8_1}) {
      const auto q = quantize_block(t, x, isa);
      const size_t off = t == DType::kQ8_0 ? 2 : 4;
      EXPECT_EQ(q[0] | (q[1] << 8), 0x3C00);  // d = 127 / 127 = 1
      for (int i = 0; i < 10; ++i)
        EXPECT_EQ(static_cast<int8_t>(q[off + i]), want[i]) << dtype_name(t) << " i=" << i;
      if (t == DType::kQ8_1) {
        EXPECT_EQ(q[2] | (q[3] << 8), 0x57F0);  // s = d * sum = 127
      }
    }
  }
}

TEST(QuantRounding, Q4_0TruncatesAfterAddingHalfAndOffset) {
  // The largest magnitude (-8) is negative, so d = -8 / -8 = 1 and code = min(15, int(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  const float v[] = {-8.0f, 7.0f, 7.6f, -0.5f, 0.49f, -7.5f, 0.5f};
  const int want[] = {0, 15, 15, 8, 8, 1, 9};
  std::copy(std::begin(v), std::end(v), x.begin());
  const auto q = quantize_block(DType::kQ4_0, x);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3C00);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(q[2 + i] & 0xF, want[i]) << "i=" << i;
  EXPECT_EQ(q[2 + 7] & 0xF, 8);  // zeros sit on code 8
  EXPECT_EQ(q[2] >> 4, 8);       // element 16 (zero) is the high nibble of byte 0

  // A positive extreme flips the scale's sign: d = 8 / -8 = -1 (f16 0xBC00).
  x.assign(32, 0.0f);
  x[0] = 8.0f;
  x[1] = -3.0f;
  const auto p = quantize_block(DType::kQ4_0, x);
  EXPECT_EQ(p[0] | (p[1] << 8), 0xBC00);
  EXPECT_EQ(p[2] & 0xF, 0);   // int(-8 + 8.5) = 0
  EXPECT_EQ(p[3] & 0xF, 11);  // int(3 + 8.5) = 11

  // An all-zero block stores d = 0 / -8 = -0.0 (f16 0x8000) and code 8 everywhere.
  const auto z = quantize_block(DType::kQ4_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(z[0] | (z[1] << 8), 0x8000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(z[2 + j], 0x88);
}

TEST(QuantRounding, Q4_1AndQ5_1UseMinAndTruncation) {
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;
  x[1] = 14.0f;  // min -1, max 14: Q4_1 d = 15 / 15 = 1
  x[2] = 0.5f;   // int(1.5 + 0.5) = 2
  x[3] = 0.49f;  // int(1.49 + 0.5) = 1
  const auto q = quantize_block(DType::kQ4_1, x);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3C00);
  EXPECT_EQ(q[2] | (q[3] << 8), 0xBC00);
  const int want[] = {0, 15, 2, 1, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q[4 + i] & 0xF, want[i]) << "i=" << i;

  x[1] = 30.0f;  // Q5_1: d = 31 / 31 = 1; code 31 needs the fifth bit
  const auto r = quantize_block(DType::kQ5_1, x);
  EXPECT_EQ(r[0] | (r[1] << 8), 0x3C00);
  uint32_t qh;
  std::memcpy(&qh, &r[4], 4);
  EXPECT_EQ(r[8 + 1] & 0xF, 15);
  EXPECT_EQ((qh >> 1) & 1, 1u);
  EXPECT_EQ((qh >> 0) & 1, 0u);
}

TEST(QuantRounding, Q5_0ScaleFromSignedMax) {
  std::vector<float> x(32, 0.0f);
  x[5] = -16.0f;  // d = -16 / -16 = 1, code = min(31, int(x + 16.5))
  x[6] = 15.0f;   // 31
  x[7] = -0.5f;   // int(16.0) = 16
  x[20] = 3.2f;   // int(19.7) = 19 -> fifth bit set for element 20
  const auto q = quantize_block(DType::kQ5_0, x);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3C00);
  uint32_t qh;
  std::memcpy(&qh, &q[2], 4);
  EXPECT_EQ((q[6 + 5] & 0xF) | (((qh >> 5) & 1) << 4), 0);
  EXPECT_EQ((q[6 + 6] & 0xF) | (((qh >> 6) & 1) << 4), 31);
  EXPECT_EQ((q[6 + 7] & 0xF) | (((qh >> 7) & 1) << 4), 16);
  EXPECT_EQ((q[6 + 4] >> 4) | (((qh >> 20) & 1) << 4), 19);
}

}  // namespace
}  // namespace nexus
