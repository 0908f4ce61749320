// The AVX-512 F32, F16 and BF16 decode dots (dot_float_avx512.cc) against the AVX2 ones: bit-identical
// for row lengths around their 32- and 16-value steps and the tails, one row at a time and through
// vec_dot_wrows (F32 rows under 256 values go to the AVX2 four-row passes); and the dispatch: with
// AVX-512 active the F32 and F16 table entries are the AVX-512 ones. Skipped without AVX-512 (the
// VNNI kernels' cases are in the repack parity tests).
#include <gtest/gtest.h>

#include <vector>

#include "nexus/dtype.h"

#include "backends/cpu/quant.h"
#include "backends/cpu/quant_impl.h"
#include "test_random.h"

namespace nexus::cpu {
namespace {

TEST(Avx512Parity, F32DotIsBitIdenticalToAvx2) {
  if (!avx512_supported()) GTEST_SKIP() << "no AVX-512 F/VL/BW/VNNI";
  for (int64_t n : {1, 7, 8, 9, 31, 32, 33, 40, 63, 255, 256, 257, 1000, 1024, 3072, 4099}) {
    constexpr int kRows = 8;
    const auto w = test::randn(static_cast<size_t>(n) * kRows, 7 + n, 3.0f);
    const auto x = test::randn(static_cast<size_t>(n), 8 + n);
    float wide[kRows], avx2[kRows];
    for (int r = 0; r < kRows; ++r) {
      const float* row = w.data() + r * n;
      EXPECT_EQ(vec_dot_f32_avx512(n, row, x.data()), vec_dot_f32_avx2(n, row, x.data()))
          << "n=" << n << " row " << r;
    }
    vec_dot_wrows_f32_avx512(n, w.data(), n * sizeof(float), x.data(), kRows, wide);
    vec_dot_wrows_f32_avx2(n, w.data(), n * sizeof(float), x.data(), kRows, avx2);
    for (int r = 0; r < kRows; ++r) EXPECT_EQ(wide[r], avx2[r]) << "wrows n=" << n << " row " << r;
  }
}

TEST(Avx512Parity, F16RowsAreBitIdenticalToAvx2) {
  if (!avx512_supported()) GTEST_SKIP() << "no AVX-512 F/VL/BW/VNNI";
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 255, 256, 257, 768, 1000, 3072, 4099}) {
    constexpr int kRows = 5;
    const auto wf = test::randn(static_cast<size_t>(n) * kRows, 17 + n, 3.0f);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) w[i] = f32_to_f16(wf[i]);
    const auto x = test::randn(static_cast<size_t>(n), 18 + n);
    float wide[kRows], avx2[kRows];
    vec_dot_wrows_f16_avx512(n, w.data(), n * sizeof(uint16_t), x.data(), kRows, wide);
    vec_dot_wrows_f16_avx2(n, w.data(), n * sizeof(uint16_t), x.data(), kRows, avx2);
    for (int r = 0; r < kRows; ++r) EXPECT_EQ(wide[r], avx2[r]) << "n=" << n << " row " << r;
  }
}

TEST(Avx512Parity, Bf16RowsAreBitIdenticalToAvx2AndToVecDot) {
  if (!avx512_supported()) GTEST_SKIP() << "no AVX-512 F/VL/BW/VNNI";
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 255, 256, 257, 768, 1000, 3072, 4099}) {
    constexpr int kRows = 5;
    const auto wf = test::randn(static_cast<size_t>(n) * kRows, 27 + n, 3.0f);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    const auto x = test::randn(static_cast<size_t>(n), 28 + n);
    float wide[kRows], avx2[kRows];
    vec_dot_wrows_bf16_avx512(n, w.data(), n * sizeof(uint16_t), x.data(), kRows, wide);
    vec_dot_wrows_bf16_avx2(n, w.data(), n * sizeof(uint16_t), x.data(), kRows, avx2);
    for (int r = 0; r < kRows; ++r) {
      EXPECT_EQ(wide[r], avx2[r]) << "n=" << n << " row " << r;
      EXPECT_EQ(avx2[r], vec_dot_bf16_avx2(n, w.data() + r * n, x.data())) << "n=" << n;
    }
  }
}

TEST(Avx512Parity, DispatchUsesTheAvx512FloatDotsWhenActive) {
  if (!avx512_active()) GTEST_SKIP() << "AVX-512 kernels not active (CPU or NEXUS_NO_AVX512=1)";
  const TypeKernels& k = kernels(DType::kF32);
  EXPECT_EQ(k.vec_dot, &vec_dot_f32_avx512);
  EXPECT_EQ(k.vec_dot_wrows, &vec_dot_wrows_f32_avx512);
  EXPECT_EQ(kernels(DType::kF16).vec_dot_wrows, &vec_dot_wrows_f16_avx512);
  EXPECT_EQ(kernels(DType::kBF16).vec_dot_wrows, &vec_dot_wrows_bf16_avx512);
}

}  // namespace
}  // namespace nexus::cpu
