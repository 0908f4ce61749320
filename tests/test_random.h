// Seeded random test inputs shared by the parity and gradient tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace nexus::test {

// n normal(0, scale) floats, a pure function of (n, seed, scale).
inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace nexus::test
