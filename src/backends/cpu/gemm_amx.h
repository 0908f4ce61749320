// AMX-BF16 matrix multiply for operands that hold bf16 values in f32 arrays (the bf16 training
// mode's weight copies, stored activations and rounded gradients): the products of bf16 values
// are exact in f32 and the tiles accumulate in f32, so the result is the f32 GEMM's within f32
// accumulation rounding. Row-major, like cblas_sgemm with alpha 1:
//   C[m x n] = (accumulate ? C : 0) + op(A)[m x k] op(B)[k x n],
// op(A) = A (trans_a false: A[i * lda + p]) or A^T (A[p * lda + i]), likewise op(B).
// Inputs that are not bf16 values are rounded to the nearest (even) bf16 first.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus::cpu {

// AMX-TILE and AMX-BF16 reported by the CPU, the tile state granted by the OS (Linux
// arch_prctl), the AVX-512 kernels active (quant.h: avx512_active) and NEXUS_NO_AMX not set to 1.
// Decided once.
bool amx_bf16_active();

// The multiply above on the calling thread. Any m, n, k >= 1; edges are padded internally.
void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                   int64_t ldc);

// The same in two parts, so that threads splitting C's columns share one conversion of op(A):
// - bf16_rows_size: the uint16_t elements op(A) takes converted (m and k rounded up to 32);
// - convert_bf16_rows: rows [r0, r1) of that (r0 a multiple of 16, r1 <= m rounded up to 32;
//   rows past m come out zero), so the conversion itself can be split by rows;
// - gemm_bf16_amx_rows: C (+)= (converted op(A)) op(B) for n columns of op(B) and C.
size_t bf16_rows_size(int64_t m, int64_t k);
void convert_bf16_rows(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda, int64_t r0,
                       int64_t r1, uint16_t* rows);
void gemm_bf16_amx_rows(const uint16_t* rows, int64_t m, int64_t k, bool trans_b, int64_t n,
                        const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

// Prefill against BF16 weights (gemm_bf16w_amx.cc): Y[n x rows] = X[n x k] W^T for a weight W
// of bf16 rows (row stride ldw elements), X f32 rounded to bf16 once (as llama.cpp's BF16 dot
// product rounds it), the bf16 products summed in f32 by the tiles. Usable where
// amx_bf16_active() and k is a multiple of 32.
bool bf16w_amx_usable(int64_t k);
// X packed for the tiles (uint16_t elements: n rounded up to 32, k): blocks of 16 tokens
// [b0, b1) of it (tokens past n come out zero), so the packing can be split over threads; the
// caller packs blocks [0, round_up(n, 32) / 16).
size_t bf16_act_size(int64_t n, int64_t k);
void pack_bf16_act(const float* x, int64_t ldx, int64_t n, int64_t k, int64_t b0, int64_t b1,
                   uint16_t* out);
// Y's columns [r0, r1) (W's rows, any range) from the packed X; y has row stride ldy.
void gemm_bf16w_amx_rows(const uint16_t* w, int64_t ldw, int64_t r0, int64_t r1, int64_t k,
                         const uint16_t* xp, int64_t n, float* y, int64_t ldy);

}  // namespace nexus::cpu
