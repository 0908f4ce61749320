// Arguments of the dequantizing matrix-vector product (ops/matvec.h): the decode step's linear
// layers with the weights kept in their file's block format.
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus {

// y[t][r] = sum_j x[t][j] W[r][j] for t < n, r < rows: W [rows x k] in `dtype` (each row its
// blocks, as in GGUF), x [n x k] and y [n x rows] f32 row-major. W's values are the dtype's
// dequantized values and x stays f32 (the CPU's dot kernels quantize x to 8 bits instead: this
// op is their f32 reference and the GPU's decode path).
struct MatvecArgs {
  const void* w;
  DType dtype;
  int64_t rows, k;
  const float* x;
  int64_t n;
  float* y;
};

}  // namespace nexus
