// The element loops of AdamW and gradient clipping, scalar and AVX2, and the optimizer ops' CPU
// variant tables built on them (backends/api/optim.h). Both ISAs compute the same operations in
// the same order (no FMA contraction), so their results are bit-identical; the parity test checks
// it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/api/kernel.h"
#include "backends/api/optim.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu::optim {

// Largest piece of a tensor one thread updates at a time (and the clip's reduction chunk).
constexpr size_t kChunk = size_t{1} << 16;

using nexus::AdamWCoef;

// For i < n, with g = g[i] * gscale: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g;
// p = p keep - s m / (sqrt(v) c + eps).
void adamw_scalar(float* p, const float* g, float* m, float* v, size_t n, const AdamWCoef& k);
void adamw_avx2(float* p, const float* g, float* m, float* v, size_t n, const AdamWCoef& k);

// AdamW with its moments kept in bf16 (AdamWOptions::bf16_state): m and v are widened to f32,
// updated and used for the parameter exactly as above, then stored with stochastic rounding
// (their f32 bits plus 16 random bits, truncated), which keeps small increments of v alive in
// expectation where round-to-nearest would drop them. The random bits of element `index0 + i`
// are mix32(index0 + i + seed) (low half for m, high half for v), so they depend on the element
// and the step's seed only: not on threads, ISA or how the update is split.
using nexus::mix32;
void adamw_bf16_scalar(float* p, const float* g, uint16_t* m, uint16_t* v, size_t n,
                       uint32_t index0, uint32_t seed, const AdamWCoef& k);
void adamw_bf16_avx2(float* p, const float* g, uint16_t* m, uint16_t* v, size_t n, uint32_t index0,
                     uint32_t seed, const AdamWCoef& k);

// Sum of g[i]^2 in double over 16 interleaved accumulators (lane i % 16, tail included), folded
// in halves (a[j] += a[j + w] for w = 8, 4, 2, 1). g^2 of a float is exact in double, so FMA or
// not gives the same sums; 16 lanes keep four independent vector add chains in flight.
constexpr int kSumLanes = 16;
inline double fold_lanes(double* a) {
  for (int w = kSumLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) a[j] += a[j + w];
  return a[0];
}
double sumsq_scalar(const float* g, size_t n);
double sumsq_avx2(const float* g, size_t n);

// g[i] *= c.
void scale_scalar(float* g, size_t n, float c);
void scale_avx2(float* g, size_t n, float c);

inline void adamw(cpu::Isa isa, float* p, const float* g, float* m, float* v, size_t n,
                  const AdamWCoef& k) {
  if (isa == cpu::Isa::kAvx2)
    adamw_avx2(p, g, m, v, n, k);
  else
    adamw_scalar(p, g, m, v, n, k);
}
inline void adamw_bf16(cpu::Isa isa, float* p, const float* g, uint16_t* m, uint16_t* v, size_t n,
                       uint32_t index0, uint32_t seed, const AdamWCoef& k) {
  if (isa == cpu::Isa::kAvx2)
    adamw_bf16_avx2(p, g, m, v, n, index0, seed, k);
  else
    adamw_bf16_scalar(p, g, m, v, n, index0, seed, k);
}
inline double sumsq(cpu::Isa isa, const float* g, size_t n) {
  return isa == cpu::Isa::kAvx2 ? sumsq_avx2(g, n) : sumsq_scalar(g, n);
}
inline void scale(cpu::Isa isa, float* g, size_t n, float c) {
  if (isa == cpu::Isa::kAvx2)
    scale_avx2(g, n, c);
  else
    scale_scalar(g, n, c);
}

}  // namespace nexus::cpu::optim

namespace nexus::cpu {

// Over pieces of optim::kChunk elements split across the pool; the sum adds the pieces' sums in
// order, so no result depends on the thread count.
KernelVariants<AdamWArgs> adamw_kernels();
KernelVariants<SumSquaresArgs> sum_squares_kernels();
KernelVariants<ScaleArgs> scale_kernels();

}  // namespace nexus::cpu
