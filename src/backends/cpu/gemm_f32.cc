// The run-time choice of our f32 GEMM (gemm_f32.h): the kernels are gemm_f32_avx512.cc and
// gemm_f32_avx2.cc, compiled with their ISA's flags and called only when the CPU runs them.
#include "backends/cpu/gemm_f32.h"

#include <vector>

#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"

namespace nexus::cpu {

bool gemm_f32_active() {
  static const bool on = active_isa() == Isa::kAvx2 && !env_is_one("NEXUS_NO_F32_GEMM");
  return on;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
              float* row_sums, bool trans_c) {
  static const bool wide = avx512_active();
  if (wide)
    gemm_f32_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums,
                    trans_c);
  else
    gemm_f32_avx2(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums, trans_c);
}

namespace {

// gemm_f32_pool (rows false) and gemm_f32_pool_rows (true): the active kernel's plan, then its part
// on every thread of the pool.
void pooled(ThreadPool* pool, bool rows, bool trans_a, bool trans_b, int64_t m, int64_t n,
            int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
            float* c, int64_t ldc, float* row_sums, bool trans_c) {
  if (pool == nullptr || pool->size() < 2)
    return gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums,
                    trans_c);
  static const GemmF32CoopParts& parts =
      avx512_active() ? gemm_f32_avx512_coop() : gemm_f32_avx2_coop();
  GemmCoop coop;
  if (rows)
    parts.plan_rows(m, k, pool->size(), &coop);
  else
    parts.plan(n, k, pool->size(), &coop);
  std::vector<int64_t> done(static_cast<size_t>(coop.blocks), 0);
  coop.done = done.data();
  pool->run([&](int, int) {
    if (rows)
      parts.part_rows(&coop, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc,
                      row_sums, trans_c);
    else
      parts.part(&coop, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, trans_c);
  });
}

}  // namespace

void gemm_f32_pool(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                   float* c, int64_t ldc, bool trans_c) {
  pooled(pool, false, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr,
         trans_c);
}

void gemm_f32_pool_rows(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                        bool accumulate, float* c, int64_t ldc, float* row_sums, bool trans_c) {
  pooled(pool, true, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums,
         trans_c);
}

}  // namespace nexus::cpu
