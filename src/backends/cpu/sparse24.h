// 2:4 semi-structured sparse weights (F32_2:4, F16_2:4, BF16_2:4): a matrix whose every group of
// four consecutive values along a row holds at most two nonzeros, stored as the two kept values of
// each group and their positions, so decode streams 9/16 (F16, BF16) or 17/32 (F32) of the dense
// bytes.
//
// Layout: a row is k / 32 blocks of 32 columns. A block is a little-endian u32 of positions, then
// the 16 kept values in the base type (F16 and BF16: 36 bytes; F32: 68). Value j (j < 16) belongs
// to group j / 2 (columns 4 * (j / 2) .. + 3 of the block) and sits at column
// 4 * (j / 2) + ((positions >> 2j) & 3); the two values of a group are in increasing column order.
// A group with fewer than two nonzeros keeps zeros at its first free positions.
// Why this shape: the positions of eight values are 16 bits, which one variable shift per vector
// turns into the lane indices of a permute over the block's 16 activations of those eight values
// (sparse24_avx2.cc), so the kernels read the activations they need with no gather.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/dtype.h"

namespace nexus::cpu {

constexpr int64_t kSparse24Block = 32;

// True for F32_2:4, F16_2:4 and BF16_2:4.
bool is_sparse24(DType t);
// The base type of a 2:4 type (F16 for F16_2:4), t itself for any other; the 2:4 type of a base
// type into *out (false when it has none).
DType sparse24_base(DType t);
bool sparse24_of(DType base, DType* out);

// True when every row of the dense matrix {rows, k} (base type F32/F16/BF16, rows `stride` bytes
// apart, k a multiple of 32) has at most two nonzeros (-0 counts as zero) in each group of four.
// Stops at the first group with three: a dense matrix costs one group.
bool rows_are_2of4(DType base, const uint8_t* w, size_t stride, int64_t rows, int64_t k);
// Writes the 2:4 form of those rows (row_bytes(2:4 type, k) each, packed) into dst; the values are
// copied bit for bit. Call only when rows_are_2of4 holds.
void compress_2of4(DType base, const uint8_t* w, size_t stride, int64_t rows, int64_t k,
                   uint8_t* dst);

// The inverse: rows {rows, k} of a 2:4 matrix of type t (src_stride bytes apart) written densely in
// the base type (row_bytes(base, k) each, packed) into dst, bit for bit, zeros in between.
void expand_2of4(DType t, const uint8_t* src, size_t src_stride, int64_t rows, int64_t k,
                 uint8_t* dst);

// Scalar kernels (quant_dispatch.cc's table). quantize keeps the two values of largest magnitude
// of each group (the first on ties) rounded to the base type: a magnitude 2:4 pruning.
void quantize_f32_2of4_ref(const float* x, void* y, int64_t n);
void quantize_f16_2of4_ref(const float* x, void* y, int64_t n);
void quantize_bf16_2of4_ref(const float* x, void* y, int64_t n);
void dequantize_f32_2of4_ref(const void* x, float* y, int64_t n);
void dequantize_f16_2of4_ref(const void* x, float* y, int64_t n);
void dequantize_bf16_2of4_ref(const void* x, float* y, int64_t n);
float vec_dot_f32_2of4_ref(int64_t n, const void* w, const void* x);
float vec_dot_f16_2of4_ref(int64_t n, const void* w, const void* x);
float vec_dot_bf16_2of4_ref(int64_t n, const void* w, const void* x);

// AVX2 kernels (sparse24_avx2.cc): one row (vec_dot), one row against up to kMaxDotRows tokens
// (vec_dot_rows, the positions decoded once for them) and up to kMaxWeightRows rows against one
// token (vec_dot_wrows, one row after the other with prefetches, as the dense F16 rows). Each
// result is the bits vec_dot_*_2of4_avx2 gives the same row and token.
float vec_dot_f32_2of4_avx2(int64_t n, const void* w, const void* x);
float vec_dot_f16_2of4_avx2(int64_t n, const void* w, const void* x);
float vec_dot_bf16_2of4_avx2(int64_t n, const void* w, const void* x);
void vec_dot_rows_f32_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                float* out);
void vec_dot_rows_f16_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                float* out);
void vec_dot_rows_bf16_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                 float* out);
void vec_dot_wrows_f32_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                 float* out);
void vec_dot_wrows_f16_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                 float* out);
void vec_dot_wrows_bf16_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                  float* out);

// Prefill: y[t * y_stride + r] = dot(row r, x[t]) for rows [r0, r1) of a 2:4 matrix of type t
// (rows w_stride bytes apart) and tokens t < n (f32 rows of k). Only the kept products, in a
// summation order of their own (within f32 rounding of vec_dot's):
// - AVX-512 (sparse24_gemm_avx512.cc): vectors across 16 output rows, each row's activation picked
//   by a permute from the token's 16 activations; faster than the dense GEMM from 16 tokens on.
// - AVX2 (sparse24_gemm_avx2.cc): tokens transposed into panels of 32, each kept weight a
//   broadcast times a panel row; bound by its one load per FMA.
// gemm_2of4 runs the widest the CPU has; gemm_2of4_takes(n) says whether it beats the rows
// expanded to their base type on the dense GEMM at n tokens (measured: bench/micro/
// prefill_bench.cc, BM_Prefill2of4Variants).
void gemm_2of4_avx512(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                      int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1);
void gemm_2of4_avx2(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                    int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1);
void gemm_2of4(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x, int64_t n,
               float* y, int64_t y_stride, int64_t r0, int64_t r1);
bool gemm_2of4_takes(int64_t n);

}  // namespace nexus::cpu
