// Platform-independent inputs for the golden quantization tests (built from raw mt19937 output
// only, since the std distributions differ between standard libraries), and the FNV-1a hash the
// golden values are recorded as.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "nexus/dtype.h"

namespace nexus::test {

// n floats in 32-element blocks cycling through four kinds of data: uniform values on a 2^-21
// grid, small integers and sixteenths (which put many scaled values exactly on rounding ties),
// and tiny values near the f16 subnormal range.
inline std::vector<float> golden_floats(int64_t n) {
  std::mt19937 rng(2024);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = rng();
    const int32_t s = static_cast<int32_t>(u) >> 8;
    switch ((i / 32) % 4) {
      case 0:
        x[i] = static_cast<float>(s) * 0x1p-21f;
        break;
      case 1:
        x[i] = static_cast<float>(static_cast<int>(u % 33) - 16);
        break;
      case 2:
        x[i] = static_cast<float>(static_cast<int>(u % 257) - 128) / 16.0f;
        break;
      default:
        x[i] = static_cast<float>(s) * 0x1p-33f;
        break;
    }
  }
  return x;
}

// Random bytes for n elements of block type t, with each f16 scale replaced by a finite value of
// moderate size (sign and mantissa random, magnitude 2^-7 to 2^-5).
inline std::vector<uint8_t> golden_blocks(DType t, int64_t n) {
  std::mt19937 rng(77);
  std::vector<uint8_t> b(row_bytes(t, n));
  for (auto& v : b) v = static_cast<uint8_t>(rng() >> 24);
  const DTypeTraits& tr = traits(t);
  auto put = [&](size_t off) {
    const uint32_t u = rng();
    const uint16_t h = static_cast<uint16_t>((u & 0x8000) | (0x2000 + (u & 0x07FF)));
    std::memcpy(&b[off], &h, 2);
  };
  for (size_t o = 0; o < b.size(); o += tr.block_bytes) {
    switch (t) {
      case DType::kQ4_0:
      case DType::kQ5_0:
      case DType::kQ8_0:
        put(o);
        break;
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        put(o);
        put(o + 2);
        break;
      case DType::kQ6_K:
        put(o + 208);
        break;
      case DType::kQ2_K:
        put(o + 80);
        put(o + 82);
        break;
      case DType::kQ3_K:
        put(o + 108);
        break;
      default:
        break;
    }
  }
  return b;
}

inline uint64_t fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace nexus::test
