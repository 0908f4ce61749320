// Our f32 GEMM, used by the training GEMMs in place of OpenBLAS's sgemm where it is active: an
// AVX-512 kernel and an AVX2/FMA one (the machine). Row-major, like cblas_sgemm with
// alpha 1, on the calling thread:
//   C[m x n] = (accumulate ? C : 0) + op(A)[m x k] op(B)[k x n],
// op(A) = A (trans_a false: A[i * lda + p]) or A^T (A[p * lda + i]), likewise op(B).
//
// How (docs/KERNELS.md, "Training f32 GEMM"): a register tile (12 x 32 in zmm, 6 x 16 in ymm) on
// k-major panels: op(A) packed into row panels once a pass of k (768; 384 on AVX2), op(B) into
// column panels in blocks that stay in L2, transposes done in registers; C is read and written
// once a pass. Each element of C is summed over p in increasing order, pass by pass, whatever m
// and the caller's split of rows or columns: the result does not depend on the threads. (OpenBLAS
// does not give that: its Zen kernels round differently for different m or n.) Neither kernel
// sums in OpenBLAS's order, nor in each other's, so results differ in the last bits between them
// (within f32 accumulation rounding).
#pragma once

#include <cstdint>

namespace nexus {
class ThreadPool;
}

namespace nexus::cpu {

// One of the kernels below can run (AVX-512 active, or the AVX2 kernels active) and
// NEXUS_NO_F32_GEMM is not set to 1. Decided once.
bool gemm_f32_active();

// The multiply above on the active kernel (AVX-512 where avx512_active(), else AVX2). Any m, n,
// k >= 1; call only when gemm_f32_active(). Uses per-thread packing buffers, kept for the
// thread's life: 768 KiB (AVX2: 256 KiB) for op(B) and m x 768 (384) floats for op(A).
// With trans_a and row_sums not null it also adds each row's sum of op(A) to row_sums:
// row_sums[i] += sum over p of A[p * lda + i], p increasing, one pass at a time (a bias's
// gradient, summed as op(A) is packed: dout^T of a d weight GEMM).
// With trans_c, C is held transposed: C(i, j) at c[j * ldc + i] (an [n x m] row-major matrix that
// receives op(A) op(B) transposed), the same bits as without. The tile's result is transposed in
// registers on its way out: a d weight computed as inp^T dout lands in dw's own [oc x c] layout
// (train_ops.cc says when that pays).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
              float* row_sums = nullptr, bool trans_c = false);

// The same multiply on every thread of `pool` at once (the calling thread included), the work
// shared dynamically: blocks of op(B)'s columns (C's columns; its rows with trans_c), pass by pass
// of k, each claimed by whichever thread is free, so a thread that the machine slows down (a busy
// neighbour on its core) takes fewer blocks instead of holding the others at the end. Every
// thread packs op(A) once a pass, as a column share of the static split did. The bits are those
// of gemm_f32 on one thread, for any pool size and any schedule. No row_sums. Runs gemm_f32
// inline without a pool of two or more threads.
void gemm_f32_pool(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                   float* c, int64_t ldc, bool trans_c = false);

// The same, the work shared in blocks of C's rows (its columns with trans_c) instead: each thread
// packs all of op(B) once a pass and only the rows of op(A) it claims, as a static split of the
// rows did. For row splits, where op(B) is the weight. row_sums as in gemm_f32.
void gemm_f32_pool_rows(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                        bool accumulate, float* c, int64_t ldc, float* row_sums = nullptr,
                        bool trans_c = false);

// One cooperative GEMM's shared state (gemm_f32_driver.h: plan and part): units are (pass,
// block) pairs, block width `width` columns; `next` is the next unclaimed unit and done[b] the
// passes of block b already stored, both read and written with atomic builtins.
struct GemmCoop {
  int64_t width = 0, blocks = 0, passes = 0;
  int64_t next = 0;
  int64_t* done = nullptr;
};
// One kernel's cooperative parts (gemm_f32_driver.h: plan, part, plan_rows, part_rows), each ISA
// file's Driver functions.
struct GemmF32CoopParts {
  void (*plan)(int64_t n, int64_t k, int threads, GemmCoop* coop);
  void (*part)(GemmCoop* coop, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
               float* c, int64_t ldc, bool trans_c);
  void (*plan_rows)(int64_t m, int64_t k, int threads, GemmCoop* coop);
  void (*part_rows)(GemmCoop* coop, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                    float* c, int64_t ldc, float* row_sums, bool trans_c);
};
const GemmF32CoopParts& gemm_f32_avx512_coop();
const GemmF32CoopParts& gemm_f32_avx2_coop();

// The two kernels, same contract as gemm_f32 (the parity tests call each one the CPU can run):
// the AVX-512 one needs avx512_active(), the AVX2 one the AVX2/FMA kernels (active_isa()).
void gemm_f32_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                     int64_t ldc, float* row_sums = nullptr, bool trans_c = false);
void gemm_f32_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
                   float* row_sums = nullptr, bool trans_c = false);

// C[m x n] (+)= A[m x k] op(B) on the AVX2 kernel (gemm_f32_avx2 with trans_a false), B's
// elements f16 (bf16 with `bf16`; row stride ldb elements) converted to f32 as op(B) is packed:
// prefill against F16 and BF16 weights (op(B) = B^T, an [n x k] weight) and attention against
// the F16 KV cache, without a separate conversion pass. The sums are those of gemm_f32_avx2 on B
// converted to f32 (the same packs, tile and order), so the result does not depend on how callers
// split n.
void gemm_f32_half_b_avx2(bool bf16, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                          int64_t lda, const uint16_t* b, int64_t ldb, bool accumulate, float* c,
                          int64_t ldc);

// One B of gemm_f32_group_avx2: C[m x n] at c (row stride ldc) = A B^T, B an [n x k] matrix of
// rows ldb elements apart, of the group's element type.
struct GemmBRows {
  const void* b;
  int64_t ldb, n;
  float* c;
  int64_t ldc;
};
enum class GemmBType { kF32, kF16, kBF16 };
inline constexpr int kMaxGemmGroup = 8;
// Up to kMaxGemmGroup products on one A (prefill's Q/K/V and gate/up weights), A packed once a pass
// of k for all of them; each C gets the bits gemm_f32_avx2 (F32) or gemm_f32_half_b_avx2 (F16,
// BF16) gives it alone, with trans_b and no accumulation.
void gemm_f32_group_avx2(GemmBType type, int count, const GemmBRows* bs, int64_t m, int64_t k,
                         const float* a, int64_t lda);
// The same on the AVX-512 kernel (needs avx512_active()): each C gets the bits gemm_f32_avx512
// gives it alone on B converted to f32.
void gemm_f32_group_avx512(GemmBType type, int count, const GemmBRows* bs, int64_t m, int64_t k,
                           const float* a, int64_t lda);

}  // namespace nexus::cpu
