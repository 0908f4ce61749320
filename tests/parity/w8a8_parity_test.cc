// W8A8 (backends/cpu/gemm_w8a8.h): the row quantizer and the activation quantizer against hand
// computations, the layout against the header's formula, the scalar, AVX2 and VNNI GEMMs against
// an integer oracle on the original Q8_0 codes (bit-identical), and matmul / matmul_group at 1, 7
// and 64 tokens on 1-3 threads, dynamic and static activation scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_w8a8.h"
#include "backends/cpu/isa.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/matmul.h"
#include "quant_test_util.h"

namespace nexus {
namespace {

using test::random_floats;

constexpr size_t kBlockBytes = 34;

uint16_t d_of(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  return d;
}

// rows x k weights as a W8A8 file holds them: Q8_0 rows, one scale a row.
std::vector<uint8_t> w8a8_rows(int64_t rows, int64_t k, uint32_t seed) {
  const size_t rb = row_bytes(DType::kQ8_0, k);
  std::vector<uint8_t> q(rb * rows);
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_row_w8a8(random_floats(k, seed + r, 0.05f).data(), q.data() + r * rb, k);
  return q;
}

std::vector<uint8_t> packed(const std::vector<uint8_t>& src, int64_t rows, int64_t k,
                            float act_scale = 0.0f) {
  std::vector<uint8_t> p(src.size());
  cpu::repack_w8a8(src.data(), p.data(), rows, k, act_scale);
  return p;
}

struct Acts {
  std::vector<int8_t> q;
  std::vector<float> s;
  std::vector<int32_t> sum;
};

Acts quantize_acts(const std::vector<float>& x, int64_t n, int64_t k, float static_scale) {
  Acts a{std::vector<int8_t>(n * k), std::vector<float>(n), std::vector<int32_t>(n)};
  for (int64_t t = 0; t < n; ++t)
    cpu::quantize_act_w8a8_ref(x.data() + t * k, k, static_scale, a.q.data() + t * k, &a.s[t],
                               &a.sum[t]);
  return a;
}

// The oracle: from the source Q8_0 codes (not the layout), exact int32 sums.
std::vector<float> oracle(const std::vector<uint8_t>& src, int64_t rows, int64_t k, const Acts& a,
                          int64_t n) {
  const size_t rb = row_bytes(DType::kQ8_0, k);
  std::vector<float> y(n * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = src.data() + r * rb;
    const float d = f16_to_f32(d_of(row));
    for (int64_t t = 0; t < n; ++t) {
      int32_t s = 0;
      for (int64_t i = 0; i < k; ++i)
        s += static_cast<int8_t>(row[(i / 32) * kBlockBytes + 2 + i % 32]) * a.q[t * k + i];
      y[t * rows + r] = static_cast<float>(s) * (d * a.s[t]);
    }
  }
  return y;
}

TEST(W8A8, RowQuantizerMatchesAHandComputation) {
  std::vector<float> x(64, 0.0f);
  x[0] = 2.54f, x[1] = -1.0f, x[2] = 0.01f, x[3] = 0.03f, x[40] = -2.54f;
  std::vector<uint8_t> q(2 * kBlockBytes);
  cpu::quantize_row_w8a8(x.data(), q.data(), 64);
  // d = f16(2.54 / 127 = 0.02) = 0.0200042724609375 (0x251F); 2.54 / d = 126.97 -> 127,
  // -1 / d = -49.99 -> -50, 0.01 / d = 0.4999 -> 0, 0.03 / d = 1.4997 -> 1.
  EXPECT_EQ(d_of(q.data()), 0x251F);
  EXPECT_EQ(d_of(q.data() + kBlockBytes), 0x251F) << "every block carries the row's scale";
  const auto* c0 = reinterpret_cast<const int8_t*>(q.data() + 2);
  const auto* c1 = reinterpret_cast<const int8_t*>(q.data() + kBlockBytes + 2);
  EXPECT_EQ(c0[0], 127);
  EXPECT_EQ(c0[1], -50);
  EXPECT_EQ(c0[2], 0);
  EXPECT_EQ(c0[3], 1);
  EXPECT_EQ(c1[8], -127);
  EXPECT_EQ(c1[9], 0);
  // A zero row: scale 0, codes 0.
  std::fill(x.begin(), x.end(), 0.0f);
  cpu::quantize_row_w8a8(x.data(), q.data(), 64);
  EXPECT_EQ(d_of(q.data()), 0);
  EXPECT_EQ(q[2], 0);
}

TEST(W8A8, ActivationQuantizerMatchesAHandComputation) {
  std::vector<float> x(64, 0.0f);
  x[0] = 1.27f, x[1] = -0.5f, x[2] = 0.004f, x[63] = 0.006f;
  for (auto fn : {cpu::quantize_act_w8a8_ref, cpu::quantize_act_w8a8_avx2}) {
    if (fn == cpu::quantize_act_w8a8_avx2 && !cpu::isa_supported(cpu::Isa::kAvx2)) continue;
    std::vector<int8_t> q(64);
    float s = 0;
    int32_t sum = 0;
    // Dynamic: s = 1.27 / 127 = 0.01; codes 127, -50, round(0.4) = 0, round(0.6) = 1.
    fn(x.data(), 64, 0.0f, q.data(), &s, &sum);
    EXPECT_FLOAT_EQ(s, 0.01f);
    EXPECT_EQ(q[0], 127);
    EXPECT_EQ(q[1], -50);
    EXPECT_EQ(q[2], 0);
    EXPECT_EQ(q[63], 1);
    EXPECT_EQ(sum, 127 - 50 + 1);
    // Static 0.005: 1.27 / 0.005 = 254 clipped to 127; -100; round(0.8) = 1; round(1.2) = 1.
    fn(x.data(), 64, 0.005f, q.data(), &s, &sum);
    EXPECT_EQ(s, 0.005f);
    EXPECT_EQ(q[0], 127);
    EXPECT_EQ(q[1], -100);
    EXPECT_EQ(q[2], 1);
    EXPECT_EQ(q[63], 1);
    EXPECT_EQ(sum, 127 - 100 + 2);
  }
}

TEST(W8A8, Avx2ActivationQuantizerIsBitIdentical) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (int64_t k : {32, 96, 1024})
    for (float st : {0.0f, 0.02f}) {
      const auto x = random_floats(k, 11 + k);
      std::vector<int8_t> q1(k), q2(k);
      float s1, s2;
      int32_t m1, m2;
      cpu::quantize_act_w8a8_ref(x.data(), k, st, q1.data(), &s1, &m1);
      cpu::quantize_act_w8a8_avx2(x.data(), k, st, q2.data(), &s2, &m2);
      EXPECT_EQ(q1, q2) << k;
      EXPECT_EQ(s1, s2);
      EXPECT_EQ(m1, m2);
    }
}

// Every byte where the header says: group codes at 64 * (i / 4) + 4 * lane + i % 4 as q + 128,
// the sixteen scales, the activation scale; tail rows plain; dequantize_row_w8a8 gives d * q.
TEST(W8A8, LayoutFollowsTheHeader) {
  for (int64_t rows : {16, 37, 64}) {
    for (int64_t k : {64, 96, 256}) {
      const size_t rb = row_bytes(DType::kQ8_0, k);
      const auto src = w8a8_rows(rows, k, 5);
      const auto p = packed(src, rows, k, 0.125f);
      std::vector<float> deq(k);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = src.data() + r * rb;
        for (int64_t i = 0; i < k; ++i) {
          const uint8_t code = static_cast<uint8_t>(row[(i / 32) * kBlockBytes + 2 + i % 32] + 128);
          const size_t at = r < rows / 16 * 16
                                ? (r / 16) * 16 * rb + 64 * (i / 4) + 4 * (r % 16) + i % 4
                                : r * rb + i;
          ASSERT_EQ(p[at], code) << rows << "x" << k << " r " << r << " i " << i;
        }
        const size_t d_at =
            r < rows / 16 * 16 ? (r / 16) * 16 * rb + 16 * k + 2 * (r % 16) : r * rb + k;
        EXPECT_EQ(d_of(p.data() + d_at), d_of(row));
        cpu::dequantize_row_w8a8(p.data(), rows, k, r, deq.data());
        std::vector<float> want(k);
        cpu::dequantize_row(DType::kQ8_0, row, want.data(), k);
        EXPECT_EQ(deq, want) << r;
      }
      EXPECT_EQ(cpu::w8a8_act_scale(p.data(), k), 0.125f);
    }
  }
}

// Rows whose blocks have scales of their own (an ordinary Q8_0 file) get one scale.
TEST(W8A8, RepackRequantizesRowsWithBlockScales) {
  const int64_t rows = 16, k = 64;
  const auto src = test::quantized_rows(DType::kQ8_0, rows, k, 9);
  const auto p = packed(src, rows, k);
  std::vector<float> x(k), got(k);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::dequantize_row(DType::kQ8_0, src.data() + r * row_bytes(DType::kQ8_0, k), x.data(), k);
    std::vector<uint8_t> want(row_bytes(DType::kQ8_0, k));
    cpu::quantize_row_w8a8(x.data(), want.data(), k);
    std::vector<float> wf(k);
    cpu::dequantize_row(DType::kQ8_0, want.data(), wf.data(), k);
    cpu::dequantize_row_w8a8(p.data(), rows, k, r, got.data());
    EXPECT_EQ(got, wf) << r;
  }
}

struct Kernel {
  const char* name;
  cpu::W8A8GemmFn fn;
  bool usable;
};

std::vector<Kernel> kernels() {
  return {{"ref", cpu::gemm_w8a8_ref, true},
          {"avx2", cpu::gemm_w8a8_avx2, cpu::isa_supported(cpu::Isa::kAvx2)},
          {"vnni", cpu::gemm_w8a8_vnni, cpu::avx512_supported()}};
}

TEST(W8A8, EveryKernelEqualsTheIntegerOracle) {
  for (int64_t rows : {16, 37, 64, 100, 130}) {
    for (int64_t k : {64, 96, 256}) {
      const auto src = w8a8_rows(rows, k, 21);
      const auto p = packed(src, rows, k);
      for (int64_t n : {1, 7, 64}) {
        const Acts a = quantize_acts(random_floats(n * k, 31), n, k, 0.0f);
        const auto want = oracle(src, rows, k, a, n);
        for (const Kernel& kn : kernels()) {
          if (!kn.usable) continue;
          std::vector<float> y(n * rows, -1.0f);
          const cpu::W8A8Problem prob{
              p.data(),   rows,         k, a.q.data(), static_cast<size_t>(k),
              a.s.data(), a.sum.data(), n, y.data(),   rows};
          // In two pieces, as threads call it: units [0, 1) and [1, end).
          const int64_t units = cpu::w8a8_units(rows);
          kn.fn(prob, 0, 1);
          kn.fn(prob, 1, units);
          ASSERT_EQ(y, want) << kn.name << " " << rows << "x" << k << " n " << n;
        }
      }
    }
  }
}

// matmul and matmul_group on W8A8 tensors equal the oracle at 1-3 threads, with dynamic and
// static activation scales, and stay close to the f32 product of the dequantized weights.
TEST(W8A8, MatmulAndGroupEqualTheOracle) {
  const int64_t k = 96;
  const std::vector<int64_t> row_counts = {37, 64, 48};
  const std::vector<float> act_scales = {0.0f, 0.0f, 0.03f};
  std::vector<std::vector<uint8_t>> src, pk;
  std::vector<Tensor> w;
  for (size_t i = 0; i < row_counts.size(); ++i) {
    src.push_back(w8a8_rows(row_counts[i], k, 50 + i));
    pk.push_back(packed(src[i], row_counts[i], k, act_scales[i]));
  }
  for (size_t i = 0; i < row_counts.size(); ++i)
    w.emplace_back(DType::kW8A8, std::vector<int64_t>{row_counts[i], k}, pk[i].data());
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 64}) {
      const auto x = random_floats(n * k, 70 + n, 1.0f, /*outliers=*/false);
      std::vector<std::vector<float>> y(row_counts.size()), yg(row_counts.size());
      std::vector<MatmulOut> outs;
      size_t scratch_bytes = 0;
      for (size_t i = 0; i < row_counts.size(); ++i) {
        y[i].assign(n * row_counts[i], 0.0f);
        yg[i].assign(n * row_counts[i], 0.0f);
        outs.push_back({&w[i], yg[i].data()});
        scratch_bytes += matmul_scratch_bytes(w[i], n) + 64;
      }
      Arena scratch(scratch_bytes, MemCategory::kScratch);
      for (size_t i = 0; i < row_counts.size(); ++i) {
        scratch.reset();
        matmul(w[i], x.data(), n, y[i].data(), pool, scratch);
        const int64_t rows = row_counts[i];
        const auto want = oracle(src[i], rows, k, quantize_acts(x, n, k, act_scales[i]), n);
        ASSERT_EQ(y[i], want) << "threads " << threads << " n " << n << " weight " << i;
        // Against f32: the error of 8-bit rounding of both operands, a few percent of the norm.
        std::vector<float> wf(rows * k);
        for (int64_t r = 0; r < rows; ++r)
          cpu::dequantize_row_w8a8(pk[i].data(), rows, k, r, wf.data() + r * k);
        double err = 0, norm = 0;
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            double f = 0;
            for (int64_t j = 0; j < k; ++j) f += double(wf[r * k + j]) * x[t * k + j];
            err += (f - y[i][t * rows + r]) * (f - y[i][t * rows + r]);
            norm += f * f;
          }
        EXPECT_LT(std::sqrt(err / norm), 0.03) << i;
      }
      scratch.reset();
      matmul_group(outs.data(), static_cast<int>(outs.size()), x.data(), n, pool, scratch);
      for (size_t i = 0; i < row_counts.size(); ++i)
        EXPECT_EQ(yg[i], y[i]) << "group, threads " << threads << " n " << n << " weight " << i;
    }
  }
}

}  // namespace
}  // namespace nexus
