// Small, fully specified pseudo-random generators (splitmix64, xoshiro256**) so that sampling gives
// bit-identical results on every platform and standard library. std::<random> distributions are
// implementation-defined, so nexus never uses them where results must be reproducible.
#pragma once

#include <array>
#include <cstdint>

namespace nexus {

// Advances `state` and returns the next splitmix64 output (Steele, Lea, Flood 2014; constants from
// Vigna's reference splitmix64.c). Used to expand one 64-bit seed into a xoshiro state.
inline uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman, Vigna 2018): 256-bit state, period 2^256 - 1, passes BigCrush.
// Matches the reference xoshiro256starstar.c output for output.
class Xoshiro256 {
 public:
  // State from four splitmix64 outputs of `seed` (the seeding the xoshiro authors recommend); this
  // never yields the all-zero state.
  explicit Xoshiro256(uint64_t seed) { reseed(seed); }
  // State given directly (for known-answer tests); must not be all zero.
  explicit Xoshiro256(const std::array<uint64_t, 4>& state) : s_(state) {}

  // Restarts the stream as if freshly constructed with `seed`.
  void reseed(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& w : s_) w = splitmix64(sm);
  }

  // Next 64 uniformly distributed bits.
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform double in [0, 1): the top 53 bits scaled by 2^-53, so every value is exact and the
  // result does not depend on the platform's floating-point rounding mode.
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  const std::array<uint64_t, 4>& state() const { return s_; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  std::array<uint64_t, 4> s_{};
};

}  // namespace nexus
