// Arguments of the optimizer ops (ops/optim.h): the AdamW update and the two halves of gradient
// clipping, a sum of squares and a scaling. Every pointer lives on the op's device, but for the
// sum, which is returned to the host.
#pragma once

#include <cstdint>

// A function both the host and CUDA compile.
#ifdef __CUDACC__
#define NEXUS_HOST_DEVICE __host__ __device__
#else
#define NEXUS_HOST_DEVICE
#endif

namespace nexus {

// A 32-bit integer hash with good avalanche: the bf16 moments' stochastic rounding bits.
NEXUS_HOST_DEVICE inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

struct AdamWCoef {
  float b1, b2;        // moment decays
  float keep;          // 1 - lr wd (or 1 without decay)
  float step_size;     // lr / (1 - b1^t)
  float inv_bc2_sqrt;  // 1 / sqrt(1 - b2^t)
  float eps;
  float gscale = 1.0f;  // g is read as g * gscale (gradient clipping folded into the update)
};

// For i < n, with gi = g[i] * gscale: m = b1 m + (1-b1) gi; v = b2 v + (1-b2) gi gi;
// p = p keep - step_size m / (sqrt(v) inv_bc2_sqrt + eps), each operation rounded to f32 in this
// order (no fused multiply-adds), so every variant on every device gives the same bits. With
// m16/v16 (instead of m/v) the moments are kept in bf16 and stored with stochastic rounding, the
// random bits of element i being mix32(index0 + i + seed), the low half for m and the high half
// for v, a moment's bf16 being the top half of its f32 bits plus 16 random bits.
struct AdamWArgs {
  float* p;
  const float* g;
  float* m = nullptr;
  float* v = nullptr;
  uint16_t* m16 = nullptr;
  uint16_t* v16 = nullptr;
  int64_t n = 0;
  uint32_t index0 = 0, seed = 0;
  AdamWCoef k{};
};

// *out (a host double) = the sum of g[i]^2 in double, in an order fixed by n alone.
struct SumSquaresArgs {
  const float* g;
  int64_t n;
  double* out;
};

// g[i] *= c.
struct ScaleArgs {
  float* g;
  int64_t n;
  float c;
};

}  // namespace nexus
