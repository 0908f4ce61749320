// CPU conversions between f32 and every computable dtype (plain and ggml block-quantized), and the
// quantized dot products the matmul is built on. The entry points dispatch at run time to AVX2
// (when the CPU has AVX2+FMA+F16C and NEXUS_FORCE_SCALAR is not 1) or to the portable scalar
// reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/isa.h"
#include "nexus/dtype.h"

namespace nexus::cpu {

// y = dtype t encoding of n floats (n a multiple of t's block size). Works for F32/F16/BF16 and the
// block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K. The Q4_0..Q8_1
// quantizers reproduce ggml's quantize_row_*_ref byte for byte; the K-quant ones search scales.
void quantize_row(DType t, const float* x, void* y, int64_t n);
// quantize_row weighted by an importance per column (qw[i] >= 0, n of them, the same for every
// row of a matrix: its inputs' mean squared activations from an imatrix): the block fits minimise
// the error those activations see. Q4_0/Q4_1/Q5_0/Q5_1 and Q2_K..Q6_K take it (takes_importance);
// other types, or qw null, are quantize_row.
void quantize_row_imp(DType t, const float* x, void* y, int64_t n, const float* qw);
bool takes_importance(DType t);
// y = the n floats encoded in x (dtype t); exact to the block layout.
void dequantize_row(DType t, const void* x, float* y, int64_t n);
// The type activations are converted to before a dot product with weights of type t: F32 for
// F32/F16/BF16, Q8_0 for Q4_0/Q5_0/Q8_0/Q8_1, Q8_1 for Q4_1/Q5_1, Q8_K for Q4_K/Q5_K/Q6_K/Q8_K.
DType vec_dot_type(DType t);
// Dot product of one weight row (type t, n elements) with one activation row already encoded in
// vec_dot_type(t). Block sums are exact integers; the scaled sums accumulate in f32.
float vec_dot(DType t, int64_t n, const void* w, const void* x);
// True when t has CPU kernels (quantize, dequantize and vec_dot).
bool has_kernels(DType t);


using QuantizeFn = void (*)(const float* x, void* y, int64_t n);
using DequantizeFn = void (*)(const void* x, float* y, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w, const void* x);
// Most activation rows a VecDotRowsFn takes in one call.
constexpr int kMaxDotRows = 4;
// out[j] = vec_dot(n, w, x + j * x_stride) for j < nx (1 <= nx <= kMaxDotRows) in one pass over
// the weight row, bit-identical to separate vec_dot calls.
using VecDotRowsFn = void (*)(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                              float* out);
// Most weight rows a VecDotWRowsFn takes in one call.
constexpr int kMaxWeightRows = 8;
// out[r] = vec_dot(n, w + r * w_stride, x) for r < nr (1 <= nr <= kMaxWeightRows): one activation
// row against several weight rows in one pass (decode), bit-identical to separate vec_dot calls.
using VecDotWRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, const void* x, int nr,
                               float* out);
// Most weight rows and tokens a VecDotTileFn takes in one call.
constexpr int kMaxTileRows = 8;
constexpr int kMaxTileTokens = 8;
// y[j * y_stride + r] = vec_dot(n, w + r * w_stride, x + j * x_stride) for r < nr, j < nx
// (1 <= nr <= kMaxTileRows, 1 <= nx <= kMaxTileTokens): batched decode, blocked over weight rows
// and tokens so a weight block is decoded once for several tokens and an activation block loaded
// once for several rows; bit-identical to separate vec_dot calls.
using VecDotTileFn = void (*)(int64_t n, const void* w, size_t w_stride, const void* x,
                              size_t x_stride, int nr, int nx, float* y, size_t y_stride);

// The kernels of one dtype for one ISA. Entries without a specialised version fall back to the
// scalar one, so every pointer is valid.
struct TypeKernels {
  DType type;
  DType dot_type;
  QuantizeFn quantize;
  DequantizeFn dequantize;
  VecDotFn vec_dot;
  VecDotRowsFn vec_dot_rows;    // null where no multi-row kernel exists: call vec_dot per row
  VecDotWRowsFn vec_dot_wrows;  // null where no multi-weight-row kernel exists
  VecDotTileFn vec_dot_tile;    // null where no rows x tokens kernel exists
};

// Kernels of t for `isa`; throws nexus::Error when t has none or the CPU cannot run `isa`.
const TypeKernels& kernels(DType t, Isa isa);
// Kernels of t for active_isa().
const TypeKernels& kernels(DType t);

}  // namespace nexus::cpu
