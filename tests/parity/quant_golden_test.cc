// Golden bit-exactness against an independent reference. The hashes below were produced from the
// same inputs by a numpy transcription of llama.cpp's gguf-py quants.py (the Python reference for
// the ggml layouts), with Q4_0/Q5_0 scaled products rounded before the offset is added (ggml's C
// reference without FMA contraction). A change in any byte or any float bit changes the hash.
// The Q2_K and Q3_K dequantization hashes come from llama.cpp's own C dequantizers (ggml of build
// d32676d77, dequantize_row_q2_K / _q3_K on golden_blocks; the same program reproduced the Q4_K
// hash below), computed once and not from nexus's code.
#include <gtest/gtest.h>

#include "parity/quant_golden_inputs.h"
#include "parity/quant_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;

struct Golden {
  DType type;
  uint64_t hash;
};

// FNV-1a of quantize(golden_floats(2048)).
constexpr Golden kQuantized[] = {
    {DType::kQ4_0, 0xe909fee078169720ull}, {DType::kQ4_1, 0x00762bfbb8a092e4ull},
    {DType::kQ5_0, 0x4e2014037cb5191dull}, {DType::kQ5_1, 0xf80bd74735fe81ffull},
    {DType::kQ8_0, 0xc20d10eb8f78d8e9ull},
};

// FNV-1a of the f32 bytes of dequantize(golden_blocks(t, 1024)).
constexpr Golden kDequantized[] = {
    {DType::kQ4_0, 0x99032e6cb3c771fbull}, {DType::kQ4_1, 0x48d59228181444dfull},
    {DType::kQ5_0, 0x03fdebb8ceb4b163ull}, {DType::kQ5_1, 0x0f8097aab6311594ull},
    {DType::kQ8_0, 0xe35427f915db98f2ull}, {DType::kQ4_K, 0xa2c0d9f65510d7c7ull},
    {DType::kQ5_K, 0xf5d89d9d60e26647ull}, {DType::kQ6_K, 0xa2cc95f6fbb712f7ull},
    {DType::kQ2_K, 0x57a62334c20e12f6ull}, {DType::kQ3_K, 0xdaa5f93e3a439ba8ull},
};

TEST(QuantGolden, LegacyQuantizersMatchReferenceBytes) {
  const auto x = test::golden_floats(32 * 64);
  for (const Golden& g : kQuantized) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
      if (!cpu::isa_supported(isa)) continue;
      const auto q = test::quantize(g.type, x, isa);
      EXPECT_EQ(test::fnv1a(q.data(), q.size()), g.hash)
          << dtype_name(g.type) << " isa=" << static_cast<int>(isa);
    }
  }
}

TEST(QuantGolden, DequantizersMatchReferenceValues) {
  const int64_t n = 256 * 4;
  for (const Golden& g : kDequantized) {
    const auto b = test::golden_blocks(g.type, n);
    for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
      if (!cpu::isa_supported(isa)) continue;
      const auto y = test::dequantize(g.type, b, n, isa);
      EXPECT_EQ(test::fnv1a(y.data(), y.size() * sizeof(float)), g.hash)
          << dtype_name(g.type) << " isa=" << static_cast<int>(isa);
    }
  }
}

}  // namespace
}  // namespace nexus
