// Arguments of the dense f32 layer (ops/dense.h): row-major activations times a GGUF [out, in]
// weight, as torch's x W^T, with its backward. The training pass's projections and output head.
#pragma once

#include <cstdint>

namespace nexus {

// out[n, oc] = add_rows + bias + inp[n, c] w[oc, c]^T (add_rows [n, oc] and bias [oc] optional).
// bf16_operands: every operand holds bf16 values, so a kernel may compute on bf16 tiles (the
// same exact products, summed in another order).
struct DenseArgs {
  float* out;
  const float* inp;
  const float* w;
  int64_t n, c, oc;
  const float* add_rows = nullptr;
  const float* bias = nullptr;
  bool bf16_operands = false;
};

// dinp += dout w, dw += dout^T inp and dbias += the column sums of dout (each output optional).
struct DenseBackwardArgs {
  float* dinp;
  float* dw;
  float* dbias;
  const float* dout;
  const float* inp;
  const float* w;
  int64_t n, c, oc;
  bool bf16_operands = false;
};

}  // namespace nexus
