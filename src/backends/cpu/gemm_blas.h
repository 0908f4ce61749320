// Prefill GEMM: many tokens against one weight matrix is compute-bound, where a packed,
// register-blocked GEMM beats per-row dot products. F32, F16 and BF16 weights go to our AVX2 GEMM
// (gemm_f32.h) where it is the active f32 GEMM; the other types, and every type elsewhere, are
// expanded to f32 in cache-sized panels (the cost is amortised over all tokens) and fed to
// OpenBLAS's sgemm.
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus::cpu {

// Fewest tokens for which gemm_rows_blas is used instead of the dot-product driver.
constexpr int64_t kBlasMinTokens = 16;

// Sets OpenBLAS to one thread, once per process. Every inference-side caller of sgemm runs on our
// ThreadPool's threads and calls this first: with OpenBLAS's own threads as well the two cores are
// oversubscribed (Q06B's prefill attention took over 15 times as long when nothing had pinned it).
void pin_blas_to_one_thread();

// Whether gemm_rows_blas multiplies weights of this type with our AVX2 GEMM (F32; F16 and BF16
// rows converted as they are packed) rather than OpenBLAS: on AVX2 hosts without AVX-512, unless
// NEXUS_NO_F32_GEMM=1. Its sums do not depend on how the rows are split over threads.
bool prefill_on_our_gemm(DType w);

// y[t * y_stride + r] = dot(x[t], w[r]) for rows [r0, r1) and all n tokens; x is f32 [n][k], w the
// whole matrix {w_rows, k} (any layout dequantize_matrix_row reads, Q4_0x8 included).
// Single-threaded (OpenBLAS is pinned to one thread); safe on disjoint row ranges concurrently.
void gemm_rows_blas(DType w_type, const uint8_t* w, size_t w_stride, int64_t w_rows, int64_t k,
                    const float* x, int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1);

// Several weights of one type on our GEMM (prefill_on_our_gemm(w_type) must hold) against the
// same x, as gemm_rows_blas does each: rows [r0[i], r1[i]) of weight i (w[i], w_rows[i] rows,
// w_stride[i] bytes apart) into y[i] (row stride y_stride[i]). x is packed once a pass of k for
// all of them; each y[i] gets the bits gemm_rows_blas gives it (which calls this with one weight).
// At most kMaxGemmGroup weights.
void gemm_rows_group(DType w_type, int count, const uint8_t* const* w, const size_t* w_stride,
                     int64_t k, const float* x, int64_t n, float* const* y, const int64_t* y_stride,
                     const int64_t* r0, const int64_t* r1);

}  // namespace nexus::cpu
