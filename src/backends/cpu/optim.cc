// Scalar reference of the AdamW and clipping loops (see optim.h).
#include "backends/cpu/optim.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "nexus/dtype.h"

namespace nexus::cpu::optim {

void adamw_scalar(float* p, const float* g, float* m, float* v, size_t n, const AdamWCoef& k) {
  const float a1 = 1.0f - k.b1, a2 = 1.0f - k.b2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.gscale;
    const float mi = k.b1 * m[i] + a1 * gi;
    const float vi = k.b2 * v[i] + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) * k.inv_bc2_sqrt + k.eps);
  }
}

namespace {
uint16_t round_stochastic(float f, uint32_t r16) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return static_cast<uint16_t>((b + r16) >> 16);
}
}  // namespace

void adamw_bf16_scalar(float* p, const float* g, uint16_t* m, uint16_t* v, size_t n,
                       uint32_t index0, uint32_t seed, const AdamWCoef& k) {
  const float a1 = 1.0f - k.b1, a2 = 1.0f - k.b2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.gscale;
    const float mi = k.b1 * bf16_to_f32(m[i]) + a1 * gi;
    const float vi = k.b2 * bf16_to_f32(v[i]) + a2 * gi * gi;
    const uint32_t r = mix32(index0 + static_cast<uint32_t>(i) + seed);
    m[i] = round_stochastic(mi, r & 0xffffu);
    v[i] = round_stochastic(vi, r >> 16);
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) * k.inv_bc2_sqrt + k.eps);
  }
}

double sumsq_scalar(const float* g, size_t n) {
  double a[kSumLanes] = {};
  for (size_t i = 0; i < n; ++i) {
    const double x = g[i];
    a[i % kSumLanes] += x * x;
  }
  return fold_lanes(a);
}

void scale_scalar(float* g, size_t n, float c) {
  for (size_t i = 0; i < n; ++i) g[i] *= c;
}

}  // namespace nexus::cpu::optim

namespace nexus::cpu {
namespace {

using optim::kChunk;

int64_t pieces(int64_t n) {
  return (n + static_cast<int64_t>(kChunk) - 1) / static_cast<int64_t>(kChunk);
}

// fn(begin, length) for each piece of kChunk elements, the pieces split across the pool.
template <class Fn>
void for_pieces(ThreadPool* pool, int64_t n, const Fn& fn) {
  par::for_ranges(pool, pieces(n), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const auto b = static_cast<size_t>(c) * kChunk;
      fn(b, std::min(static_cast<size_t>(n), b + kChunk) - b);
    }
  });
}

template <bool kAvx2>
void adamw(const AdamWArgs& a, ThreadPool* pool) {
  for_pieces(pool, a.n, [&](size_t b, size_t len) {
    if (a.m16 != nullptr) {
      const auto i0 = a.index0 + static_cast<uint32_t>(b);
      (kAvx2 ? optim::adamw_bf16_avx2 : optim::adamw_bf16_scalar)(a.p + b, a.g + b, a.m16 + b,
                                                                  a.v16 + b, len, i0, a.seed, a.k);
    } else {
      (kAvx2 ? optim::adamw_avx2 : optim::adamw_scalar)(a.p + b, a.g + b, a.m + b, a.v + b, len,
                                                        a.k);
    }
  });
}

template <bool kAvx2>
void sum_squares(const SumSquaresArgs& a, ThreadPool* pool) {
  std::vector<double> part(static_cast<size_t>(pieces(a.n)));
  for_pieces(pool, a.n, [&](size_t b, size_t len) {
    part[b / kChunk] = (kAvx2 ? optim::sumsq_avx2 : optim::sumsq_scalar)(a.g + b, len);
  });
  double s = 0.0;
  for (const double x : part) s += x;
  *a.out = s;
}

template <bool kAvx2>
void scale(const ScaleArgs& a, ThreadPool* pool) {
  for_pieces(pool, a.n, [&](size_t b, size_t len) {
    (kAvx2 ? optim::scale_avx2 : optim::scale_scalar)(a.g + b, len, a.c);
  });
}

const KernelVariant<AdamWArgs> kAdamW[] = {{"avx2", avx2_active, adamw<true>},
                                           {"scalar", always_available, adamw<false>}};
const KernelVariant<SumSquaresArgs> kSumSquares[] = {
    {"avx2", avx2_active, sum_squares<true>}, {"scalar", always_available, sum_squares<false>}};
const KernelVariant<ScaleArgs> kScale[] = {{"avx2", avx2_active, scale<true>},
                                           {"scalar", always_available, scale<false>}};

}  // namespace

KernelVariants<AdamWArgs> adamw_kernels() { return kAdamW; }
KernelVariants<SumSquaresArgs> sum_squares_kernels() { return kSumSquares; }
KernelVariants<ScaleArgs> scale_kernels() { return kScale; }

}  // namespace nexus::cpu
