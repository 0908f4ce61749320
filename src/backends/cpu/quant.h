// TEMPORARY (lead): replaced by the quant branch.
#pragma once
#include <cstdint>
#include "nexus/dtype.h"
namespace nexus::cpu {
void quantize_row(DType t, const float* x, void* y, int64_t n);
void dequantize_row(DType t, const void* x, float* y, int64_t n);
DType vec_dot_type(DType t);
float vec_dot(DType t, int64_t n, const void* w, const void* x);
}
