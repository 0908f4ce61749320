// The check both GEMM parity tests (gemm_amx_parity_test.cc, gemm_f32_parity_test.cc) run: C
// (+)= op(A) op(B) on operands with padded leading dimensions, overwrite (C full of NaN where it
// is written) and accumulate, against a double-precision reference within k + 1 f32 roundings of
// the terms' magnitudes, and nothing outside C written.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace nexus::test {

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
};

// gemm(ta, tb, m, n, k, a, lda, b, ldb, accumulate, c, ldc), as cblas_sgemm with alpha 1.
using GemmFn = std::function<void(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                  const float*, int64_t, bool, float*, int64_t)>;
// values(count, seed): the operands' values.
using ValuesFn = std::function<std::vector<float>(size_t, uint32_t)>;

inline void expect_gemm_matches_double(const GemmCase& cs, const ValuesFn& values,
                                       const GemmFn& gemm) {
  for (bool accumulate : {false, true}) {
    const int64_t lda = (cs.ta ? cs.m : cs.k) + 3, ldb = (cs.tb ? cs.k : cs.n) + 5;
    const int64_t ldc = cs.n + 7, rows_c = cs.m + 2;
    const auto a = values(static_cast<size_t>((cs.ta ? cs.k : cs.m) * lda), 1);
    const auto b = values(static_cast<size_t>((cs.tb ? cs.n : cs.k) * ldb), 2);
    const auto c0 = values(static_cast<size_t>(rows_c * ldc), 3);
    std::vector<float> c = c0;
    if (!accumulate)  // C is not read: NaN anywhere it would be would show
      for (int64_t i = 0; i < cs.m; ++i)
        for (int64_t j = 0; j < cs.n; ++j) c[i * ldc + j] = NAN;
    gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc);
    for (int64_t i = 0; i < rows_c; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const float got = c[i * ldc + j];
        if (i >= cs.m || j >= cs.n) {
          ASSERT_EQ(std::memcmp(&got, &c0[i * ldc + j], 4), 0)
              << "wrote outside C at " << i << "," << j;
          continue;
        }
        double ref = accumulate ? c0[i * ldc + j] : 0.0, mag = std::fabs(ref);
        for (int64_t p = 0; p < cs.k; ++p) {
          const double x = cs.ta ? a[p * lda + i] : a[i * lda + p];
          const double y = cs.tb ? b[j * ldb + p] : b[p * ldb + j];
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const double tol = 6e-8 * static_cast<double>(cs.k + 1) * mag + 1e-30;
        ASSERT_NEAR(got, ref, tol)
            << "ta=" << cs.ta << " tb=" << cs.tb << " m=" << cs.m << " n=" << cs.n << " k=" << cs.k
            << " acc=" << accumulate << " at " << i << "," << j;
      }
    }
  }
}

}  // namespace nexus::test
