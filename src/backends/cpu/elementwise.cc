// CPU element-wise kernels of the forward pass that have no backward: bias, residual, and the
// sampler's copy with block maxima (scalar, and the dispatch to AVX2).
#include "backends/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {

bool copy_block_max_scalar(const float* src, float* dst, int64_t n, float* block_max) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  bool ok = true;
  for (int64_t b = 0; b * kBlockMaxEntries < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlockMaxEntries);
    float m = -kInf;
    for (int64_t i = b * kBlockMaxEntries; i < end; ++i) {
      const float x = src[i];
      ok &= x < kInf;  // false for NaN and +inf
      m = x > m ? x : m;
      if (dst != nullptr) dst[i] = x;
    }
    block_max[b] = m;
  }
  return ok;
}

void add_bias(float* y, const float* b, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] += b[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

bool copy_block_max(const float* src, float* dst, int64_t n, float* block_max) {
  if (active_isa() == Isa::kAvx2) return copy_block_max_avx2(src, dst, n, block_max);
  return copy_block_max_scalar(src, dst, n, block_max);
}

}  // namespace nexus::cpu
