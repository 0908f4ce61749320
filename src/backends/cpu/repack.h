// Q4_0x8: Q4_0 weight matrices repacked once at load so the decode kernel reads eight rows with
// plain 32-byte loads. Same bytes as Q4_0, reordered; the tensor keeps its {rows, k} shape and
// DType::kQ4_0x8.
//
// Layout (rb = k / 32 * 18 bytes, the Q4_0 row size): rows are taken in groups of eight. Group g
// (rows 8g .. 8g + 7, g < rows / 8) fills bytes [8g * rb, (8g + 8) * rb) block column by block
// column; block column i (elements 32i .. 32i + 31) is 144 bytes:
//   bytes   0- 15: the eight rows' f16 scales d, row 0 first;
//   bytes  16-143: four 32-byte pairs; pair p holds row p's 16 code bytes, then row p + 4's.
// Code bytes keep Q4_0's nibble order (element j low nibble, j + 16 high nibble). The last
// rows % 8 rows (the tail) stay in plain Q4_0 layout at their usual offsets r * rb.
// Why this shape: one 32-byte load feeds two rows into the AVX2 kernel (row p in the low lane,
// p + 4 in the high lane), which after the lane reduction leaves rows 0..7 in lane order, so the
// eight scales are one 16-byte load and one conversion (dot_q4_0x8_avx2.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/gemm.h"
#include "nexus/dtype.h"

namespace nexus::cpu {

constexpr int64_t kRepackRows = 8;

// Writes the Q4_0x8 image of a Q4_0 matrix {rows, k} (src, rows * rb bytes) into dst (the same
// size; must not overlap src).
void repack_q4_0x8(const void* src, void* dst, int64_t rows, int64_t k);

// Copies row r of a Q4_0x8 matrix {rows, k} back into plain Q4_0 blocks (rb bytes at out).
void unpack_row_q4_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);

// Row r of a weight matrix {rows, k} stored at w (row stride row_bytes(t, k)) as f32, for every
// computable type and Q4_0x8: lookups and panel expansion go through here so they read any layout.
void dequantize_matrix_row(DType t, const uint8_t* w, int64_t rows, int64_t k, int64_t r,
                           float* out);

// y[t * y_stride + 8g + r] = vec_dot(row r of group g, token t) for g < n_groups, r < 8 and
// t < n_tokens: the groups start at w (each 8 * rb bytes), the tokens are Q8_0 rows x_stride
// bytes apart. The scalar version repeats the scalar Q4_0 vec_dot's operations, the AVX2 one the
// AVX2 vec_dot's, so every output is bit-identical to vec_dot of the same ISA on the original row.
void gemm_q4_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// gemm_rows for a Q4_0x8 problem (p.w_type == kQ4_0x8, p.w_stride the Q4_0 row size, `rows` the
// matrix's row count): rows [r0, r1), r0 a multiple of 8. Tail rows go to the Q4_0 kernels.
void gemm_rows_q4_0x8(const GemmProblem& p, int64_t rows, int64_t r0, int64_t r1);

}  // namespace nexus::cpu
