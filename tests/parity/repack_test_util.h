// Helpers shared by the repacked-layout parity tests (repack_parity_test.cc for Q4_0x8,
// repack_x8_parity_test.cc for the others): the same computation through a weight matrix and
// through its repacked image.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/gemm_blas.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "nexus/tensor.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "quant_test_util.h"

namespace nexus::test {

// matmul of n random activation rows (seed 400) through `plain` and through `packed`, two
// weights of one shape {rows, k}: {plain's output, packed's output}.
inline std::pair<std::vector<float>, std::vector<float>> matmul_both(const Tensor& plain,
                                                                     const Tensor& packed,
                                                                     int64_t n, ThreadPool& pool) {
  const int64_t rows = plain.dim(0), k = plain.dim(1);
  const auto x = random_floats(n * k, 400);
  std::pair<std::vector<float>, std::vector<float>> y{std::vector<float>(n * rows),
                                                      std::vector<float>(n * rows)};
  Arena s1(matmul_scratch_bytes(plain, n) + 64, MemCategory::kScratch);
  Arena s2(matmul_scratch_bytes(packed, n) + 64, MemCategory::kScratch);
  // The plain layout in calls below kBlasMinTokens, so on its dot kernels (matmul_on_blas) as the
  // packed one is at any n.
  const int64_t piece = cpu::kBlasMinTokens - 1;
  for (int64_t t = 0; t < n; t += piece) {
    s1.reset();
    matmul(plain, x.data() + t * k, std::min(piece, n - t), y.first.data() + t * rows, pool, s1);
  }
  matmul(packed, x.data(), n, y.second.data(), pool, s2);
  return y;
}

// embed_rows of the first, the last and two middle rows through `plain` and through `packed`.
inline std::pair<std::vector<float>, std::vector<float>> embed_both(const Tensor& plain,
                                                                    const Tensor& packed) {
  const int64_t rows = plain.dim(0), k = plain.dim(1);
  const std::vector<int32_t> ids = {0, static_cast<int32_t>(rows - 1), 5, 3};
  std::pair<std::vector<float>, std::vector<float>> e{std::vector<float>(ids.size() * k),
                                                      std::vector<float>(ids.size() * k)};
  embed_rows(plain, ids, e.first.data());
  embed_rows(packed, ids, e.second.data());
  return e;
}

}  // namespace nexus::test
