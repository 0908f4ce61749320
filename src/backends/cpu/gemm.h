// CPU compute loop behind nexus::matmul: dot products of weight rows with pre-converted activation
// rows, tiled so a tile of weight rows is reused from cache across a tile of tokens.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/dtype.h"

namespace nexus::cpu {

// One matmul problem. Activations are already encoded in vec_dot_type(w_type).
struct GemmProblem {
  DType w_type;
  const uint8_t* w;  // weight rows, w_stride bytes apart
  size_t w_stride;
  int64_t k;         // elements per row
  const uint8_t* x;  // activation rows, x_stride bytes apart
  size_t x_stride;
  int64_t n_tokens;
  float* y;  // y[t * y_stride + r]
  int64_t y_stride;
};

// Computes y for weight rows [r0, r1) and all tokens. Safe to call concurrently on disjoint row
// ranges.
void gemm_rows(const GemmProblem& p, int64_t r0, int64_t r1);

// out[r] = dot(w + r * stride, x) for r < 4, f32 (AVX2/FMA; call only when active_isa() is kAvx2).
void dot4_f32_avx2(int64_t k, const float* w, size_t stride, const float* x, float* out);
// The same for r < 8; each row's result is the bits dot4_f32_avx2 gives it.
void dot8_f32_avx2(int64_t k, const float* w, size_t stride, const float* x, float* out);

}  // namespace nexus::cpu
