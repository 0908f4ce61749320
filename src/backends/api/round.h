// Arguments of the rounding ops of mixed precision (ops/round.h): f32 values rounded to bf16 or
// fp16 (round to nearest even; fp16 overflows to inf, NaN stays NaN), and 16-bit encodings.
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus {

// y[i] = x[i] rounded to p, as f32 (y may be x). p is kBF16 or kF16.
struct RoundArgs {
  Precision p;
  const float* x;
  float* y;
  int64_t n;
};

// Rounds x in place and writes the 16-bit encodings to h.
struct RoundPackArgs {
  Precision p;
  float* x;
  uint16_t* h;
  int64_t n;
};

// x[i] = the value of h[i] (exact).
struct UnpackArgs {
  Precision p;
  const uint16_t* h;
  float* x;
  int64_t n;
};

}  // namespace nexus
