// 2:4 sparse weights (backends/cpu/sparse24.h): the layout against the header, the magnitude
// quantizer, the load-time check and compression, the scalar and AVX2 kernels against a
// double-precision dot of the dense row, the multi-row and multi-token kernels bit-identical to
// the one-row one, and matmul (decode, batched decode, prefill; 1-3 threads) against the dense
// weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/quant.h"
#include "backends/cpu/sparse24.h"
#include "nexus/core/thread_pool.h"
#include "quant_test_util.h"
#include "repack_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;
using test::random_floats;

const DType kBases[] = {DType::kF32, DType::kF16, DType::kBF16};

DType sparse_of(DType base) {
  DType t = base;
  EXPECT_TRUE(cpu::sparse24_of(base, &t));
  return t;
}

// Dense rows {rows, k} of `base` with two of every four values zero (the two of smallest |x|).
std::vector<uint8_t> dense_2of4(DType base, int64_t rows, int64_t k, uint32_t seed) {
  std::vector<uint8_t> out(row_bytes(base, k) * rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto x = random_floats(k, seed + static_cast<uint32_t>(r));
    for (int64_t g = 0; g < k; g += 4) {
      // Zero the two smallest of the group.
      for (int z = 0; z < 2; ++z) {
        int m = -1;
        for (int i = 0; i < 4; ++i)
          if (x[g + i] != 0.0f && (m < 0 || std::fabs(x[g + i]) < std::fabs(x[g + m]))) m = i;
        x[g + m] = 0.0f;
      }
    }
    cpu::quantize_row(base, x.data(), out.data() + r * row_bytes(base, k), k);
  }
  return out;
}

std::vector<float> dequantized(DType t, const uint8_t* row, int64_t k) {
  std::vector<float> v(k);
  cpu::dequantize_row(t, row, v.data(), k);
  return v;
}

TEST(Sparse24, LayoutFollowsTheHeader) {
  // One F16 block by hand: group g keeps columns {g % 4, 3} (group 3 keeps {2, 3}).
  std::vector<float> dense(32, 0.0f);
  uint32_t pos = 0;
  std::vector<uint16_t> vals;
  for (int g = 0; g < 8; ++g) {
    const int a = g % 4 == 3 ? 2 : g % 4, b = 3;
    dense[4 * g + a] = float(g + 1);
    dense[4 * g + b] = -float(g + 1) / 2;
    pos |= uint32_t(a) << (4 * g) | uint32_t(b) << (4 * g + 2);
    vals.push_back(f32_to_f16(float(g + 1)));
    vals.push_back(f32_to_f16(-float(g + 1) / 2));
  }
  std::vector<uint16_t> h(32);
  cpu::quantize_row(DType::kF16, dense.data(), h.data(), 32);
  std::vector<uint8_t> c(36);
  ASSERT_TRUE(cpu::rows_are_2of4(DType::kF16, reinterpret_cast<uint8_t*>(h.data()), 64, 1, 32));
  cpu::compress_2of4(DType::kF16, reinterpret_cast<uint8_t*>(h.data()), 64, 1, 32, c.data());
  uint32_t got;
  std::memcpy(&got, c.data(), 4);
  EXPECT_EQ(got, pos);
  EXPECT_EQ(std::memcmp(c.data() + 4, vals.data(), 32), 0);
  EXPECT_EQ(row_bytes(DType::kF16_2of4, 64), 72u);
  EXPECT_EQ(row_bytes(DType::kF32_2of4, 64), 136u);
  EXPECT_EQ(dequantized(DType::kF16_2of4, c.data(), 32), dense);
}

TEST(Sparse24, QuantizeKeepsTheTwoLargestOfEachGroup) {
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    const int64_t k = 96;
    auto x = random_floats(k, 7);
    x[5] = x[6];  // a tie: the first is kept
    std::vector<uint8_t> q(row_bytes(t, k));
    cpu::quantize_row(t, x.data(), q.data(), k);
    const auto y = dequantized(t, q.data(), k);
    for (int64_t g = 0; g < k; g += 4) {
      int kept = 0;
      for (int i = 0; i < 4; ++i) {
        if (y[g + i] == 0.0f) continue;
        ++kept;
        int larger = 0;
        for (int j = 0; j < 4; ++j)
          larger += std::fabs(x[g + j]) > std::fabs(x[g + i]) ||
                    (std::fabs(x[g + j]) == std::fabs(x[g + i]) && j < i);
        EXPECT_LT(larger, 2) << dtype_name(t) << " column " << g + i;
        std::vector<float> one(1);
        std::vector<uint8_t> r(row_bytes(base, 1));
        cpu::quantize_row(base, &x[g + i], r.data(), 1);
        cpu::dequantize_row(base, r.data(), one.data(), 1);
        EXPECT_EQ(y[g + i], one[0]) << dtype_name(t);
      }
      EXPECT_EQ(kept, 2) << dtype_name(t) << " group " << g / 4;
    }
  }
}

TEST(Sparse24, CheckAndCompressionAreExact) {
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    const int64_t rows = 5, k = 160;
    auto d = dense_2of4(base, rows, k, 11);
    const size_t rb = row_bytes(base, k);
    ASSERT_TRUE(cpu::rows_are_2of4(base, d.data(), rb, rows, k)) << dtype_name(base);
    std::vector<uint8_t> c(row_bytes(t, k) * rows);
    cpu::compress_2of4(base, d.data(), rb, rows, k, c.data());
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(dequantized(t, c.data() + r * row_bytes(t, k), k),
                dequantized(base, d.data() + r * rb, k))
          << dtype_name(base) << " row " << r;
    // A third nonzero in the last group of the last row: not 2:4.
    auto bad = d;
    std::vector<float> last = dequantized(base, bad.data() + (rows - 1) * rb, k);
    for (int i = 0; i < 4; ++i)
      if (last[k - 4 + i] == 0.0f) {
        last[k - 4 + i] = 0.5f;
        break;
      }
    cpu::quantize_row(base, last.data(), bad.data() + (rows - 1) * rb, k);
    EXPECT_FALSE(cpu::rows_are_2of4(base, bad.data(), rb, rows, k)) << dtype_name(base);
    // Negative zeros are zeros; a width that fills no 32-column block is not compressed.
    std::vector<float> negz(32, -0.0f);
    std::vector<uint8_t> nz(row_bytes(base, 32));
    cpu::quantize_row(base, negz.data(), nz.data(), 32);
    EXPECT_TRUE(cpu::rows_are_2of4(base, nz.data(), nz.size(), 1, 32)) << dtype_name(base);
    EXPECT_FALSE(cpu::rows_are_2of4(base, d.data(), rb, 1, 36)) << dtype_name(base);
  }
}

// vec_dot (scalar and AVX2) within f32 rounding of a double dot of the dense row; the multi-row
// and multi-token kernels give each row and token vec_dot's bits.
TEST(Sparse24, KernelsAgainstADoubleDot) {
  const bool avx2 = cpu::isa_supported(Isa::kAvx2);
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    for (int64_t k : {32, 64, 800, 2048}) {
      const int64_t rows = 8;
      auto d = dense_2of4(base, rows, k, 21);
      const size_t rb = row_bytes(base, k), sb = row_bytes(t, k);
      std::vector<uint8_t> w(sb * rows);
      cpu::compress_2of4(base, d.data(), rb, rows, k, w.data());
      const auto x = random_floats(4 * k, 23);
      for (int64_t r = 0; r < rows; ++r) {
        const auto dense = dequantized(base, d.data() + r * rb, k);
        for (int j = 0; j < 4; ++j) {
          double want = 0.0, mag = 0.0;
          for (int64_t i = 0; i < k; ++i) {
            want += double(dense[i]) * x[j * k + i];
            mag += std::fabs(double(dense[i]) * x[j * k + i]);
          }
          const float* xj = x.data() + j * k;
          for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
            if (isa == Isa::kAvx2 && !avx2) continue;
            const float got = cpu::kernels(t, isa).vec_dot(k, w.data() + r * sb, xj);
            EXPECT_NEAR(got, want, 1e-6 * mag + 1e-7)
                << dtype_name(t) << " k=" << k << " row " << r << " isa " << int(isa);
          }
        }
      }
      if (!avx2) continue;
      const cpu::TypeKernels& kk = cpu::kernels(t, Isa::kAvx2);
      ASSERT_NE(kk.vec_dot_rows, nullptr);
      ASSERT_NE(kk.vec_dot_wrows, nullptr);
      for (int nx = 1; nx <= cpu::kMaxDotRows; ++nx) {
        float out[cpu::kMaxDotRows];
        kk.vec_dot_rows(k, w.data() + sb, x.data(), k * sizeof(float), nx, out);
        for (int j = 0; j < nx; ++j)
          EXPECT_EQ(out[j], kk.vec_dot(k, w.data() + sb, x.data() + j * k))
              << dtype_name(t) << " k=" << k << " nx=" << nx << " token " << j;
      }
      for (int nr = 1; nr <= 8; ++nr) {
        float out[8];
        kk.vec_dot_wrows(k, w.data(), sb, x.data(), nr, out);
        for (int r = 0; r < nr; ++r)
          EXPECT_EQ(out[r], kk.vec_dot(k, w.data() + r * sb, x.data()))
              << dtype_name(t) << " k=" << k << " nr=" << nr << " row " << r;
      }
    }
  }
}

// matmul through the compressed weights equals matmul through the dense ones: decode, batched
// decode and prefill (from cpu::kBlasMinTokens tokens), several thread counts.
TEST(Sparse24, MatmulMatchesTheDenseWeights) {
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t rows : {1, 9, 70}) {
        const int64_t k = 256;
        auto d = dense_2of4(base, rows, k, 31);
        std::vector<uint8_t> w(row_bytes(t, k) * rows);
        cpu::compress_2of4(base, d.data(), row_bytes(base, k), rows, k, w.data());
        const Tensor td(base, {rows, k}, d.data());
        const Tensor ts(t, {rows, k}, w.data());
        // Decode, batched decode and prefill (17, 64, 200: whichever path gemm_2of4_takes picks).
        for (int64_t n : {1, 3, 8, 17, 64, 200}) {
          const auto [a, b] = test::matmul_both(td, ts, n, pool);
          float scale = 0.0f;
          for (float v : a) scale = std::max(scale, std::fabs(v));
          for (size_t i = 0; i < a.size(); ++i)
            ASSERT_NEAR(a[i], b[i], 2e-6f * scale * std::sqrt(float(k)))
                << dtype_name(t) << " rows=" << rows << " tokens=" << n << " threads=" << threads
                << " i=" << i;
        }
      }
    }
  }
}

// The prefill kernels (AVX2, and AVX-512 where the CPU has it) against a double dot per row and
// token: token counts cut mid-way through the kernels' panels and token blocks, a share of the rows
// (the rest left untouched) crossing AVX-512's blocks of 32 rows, an output stride wider than the
// rows.
TEST(Sparse24, PrefillKernelsAgainstADoubleDot) {
  using Fn = void (*)(DType, const uint8_t*, size_t, int64_t, const float*, int64_t, float*,
                      int64_t, int64_t, int64_t);
  std::vector<std::pair<const char*, Fn>> fns;
  if (cpu::isa_supported(Isa::kAvx2)) fns.push_back({"avx2", cpu::gemm_2of4_avx2});
  if (cpu::avx512_supported()) fns.push_back({"avx512", cpu::gemm_2of4_avx512});
  if (fns.empty()) GTEST_SKIP() << "no AVX2 on this CPU: the scalar build expands 2:4 panels";
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    for (const auto& [rows, k] :
         std::vector<std::pair<int64_t, int64_t>>{{13, 32}, {13, 800}, {45, 96}}) {
      auto d = dense_2of4(base, rows, k, 41);
      const size_t rb = row_bytes(base, k), sb = row_bytes(t, k);
      std::vector<uint8_t> w(sb * rows);
      cpu::compress_2of4(base, d.data(), rb, rows, k, w.data());
      for (int64_t n : {1, 5, 32, 33, 64, 65, 130}) {
        const auto x = random_floats(n * k, 43);
        const int64_t y_stride = rows + 3, r0 = 2, r1 = rows - 1;
        for (const auto& [name, fn] : fns) {
          std::vector<float> y(n * y_stride, -7.0f);
          fn(t, w.data(), sb, k, x.data(), n, y.data(), y_stride, r0, r1);
          for (int64_t tok = 0; tok < n; ++tok)
            for (int64_t r = 0; r < y_stride; ++r) {
              const float got = y[tok * y_stride + r];
              if (r < r0 || r >= r1) {
                ASSERT_EQ(got, -7.0f) << name << " wrote row " << r;
                continue;
              }
              const auto dense = dequantized(base, d.data() + r * rb, k);
              double want = 0.0, mag = 0.0;
              for (int64_t i = 0; i < k; ++i) {
                want += double(dense[i]) * x[tok * k + i];
                mag += std::fabs(double(dense[i]) * x[tok * k + i]);
              }
              ASSERT_NEAR(got, want, 1e-6 * mag + 1e-7)
                  << name << " " << dtype_name(t) << " k=" << k << " n=" << n << " token " << tok
                  << " row " << r;
            }
        }
      }
    }
  }
}

TEST(Sparse24, TypesAreInternal) {
  for (DType base : kBases) {
    const DType t = sparse_of(base);
    EXPECT_TRUE(cpu::is_sparse24(t));
    EXPECT_FALSE(cpu::is_sparse24(base));
    EXPECT_EQ(cpu::sparse24_base(t), base);
    EXPECT_FALSE(dtype_traits(static_cast<uint32_t>(t)).has_value()) << "never a file's type";
    EXPECT_FALSE(dtype_from_name(dtype_name(t)).has_value());
    EXPECT_EQ(cpu::vec_dot_type(t), DType::kF32);
  }
  DType none;
  EXPECT_FALSE(cpu::sparse24_of(DType::kQ8_0, &none));
}

}  // namespace
}  // namespace nexus
