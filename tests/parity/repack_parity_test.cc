// Q4_0x8 (load-time repacked Q4_0, backends/cpu/repack.h): the byte layout against the formula in
// the header, round trips, both kernels bit-identical to vec_dot of their ISA on the original rows,
// and every consumer (matmul at 1-40 tokens and 1-3 threads, prefill included, embed_rows).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cpu/repack.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "quant_test_util.h"
#include "repack_test_util.h"

namespace nexus {
namespace {

using cpu::Isa;
using test::random_floats;

constexpr size_t kBlock = 18;  // bytes of a Q4_0 block

std::vector<uint8_t> q4_rows(int64_t rows, int64_t k, uint32_t seed) {
  return test::quantized_rows(DType::kQ4_0, rows, k, seed);
}

std::vector<uint8_t> repacked(const std::vector<uint8_t>& w, int64_t rows, int64_t k) {
  std::vector<uint8_t> p(w.size());
  cpu::repack_q4_0x8(w.data(), p.data(), rows, k);
  return p;
}

std::vector<uint8_t> q8_rows(int64_t n, int64_t k, uint32_t seed) {
  return test::quantized_rows(DType::kQ8_0, n, k, seed);
}

const std::vector<int64_t> kRowCounts = {8, 13, 16, 37, 64};
const std::vector<int64_t> kKs = {32, 96, 1024};

// Every byte lands where repack.h says: block column i of group g at (8g * rb + 144 i); the eight
// scales first, then row r's code bytes 4j .. 4j + 3 at 16 + 32j + 4 (r % 8); the tail unchanged.
TEST(RepackQ4_0x8, LayoutFollowsTheHeader) {
  for (int64_t rows : kRowCounts) {
    for (int64_t k : kKs) {
      const size_t rb = row_bytes(DType::kQ4_0, k);
      const auto w = test::random_blocks(DType::kQ4_0, rows * k, 7);
      const auto p = repacked(w, rows, k);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k / 32; ++i) {
          const uint8_t* src = w.data() + r * rb + i * kBlock;
          const uint8_t* d;
          uint8_t qs[16];
          if (r < rows / 8 * 8) {
            const uint8_t* col = p.data() + (r / 8) * 8 * rb + i * 144;
            d = col + 2 * (r % 8);
            for (int j = 0; j < 4; ++j) std::memcpy(qs + 4 * j, col + 16 + 32 * j + 4 * (r % 8), 4);
          } else {
            d = p.data() + r * rb + i * kBlock;
            std::memcpy(qs, d + 2, 16);
          }
          ASSERT_EQ(std::memcmp(d, src, 2), 0) << "scale row " << r << " block " << i;
          ASSERT_EQ(std::memcmp(qs, src + 2, 16), 0) << "codes row " << r << " block " << i;
        }
      }
    }
  }
}

TEST(RepackQ4_0x8, RowsUnpackAndDequantizeToTheOriginal) {
  for (int64_t rows : kRowCounts) {
    for (int64_t k : kKs) {
      const size_t rb = row_bytes(DType::kQ4_0, k);
      const auto w = test::random_blocks(DType::kQ4_0, rows * k, 11);
      const auto p = repacked(w, rows, k);
      std::vector<uint8_t> row(rb);
      std::vector<float> a(k), b(k);
      for (int64_t r = 0; r < rows; ++r) {
        cpu::unpack_row_q4_0x8(p.data(), rows, k, r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), w.data() + r * rb, rb), 0) << "row " << r;
        cpu::dequantize_row(DType::kQ4_0, w.data() + r * rb, a.data(), k);
        cpu::dequantize_matrix_row(DType::kQ4_0x8, p.data(), rows, k, r, b.data());
        ASSERT_EQ(std::memcmp(a.data(), b.data(), k * sizeof(float)), 0) << "row " << r;
      }
    }
  }
  std::vector<uint8_t> w(8 * kBlock), out(kBlock);
  EXPECT_THROW(cpu::unpack_row_q4_0x8(w.data(), 8, 32, 8, out.data()), Error);
  EXPECT_THROW(cpu::repack_q4_0x8(w.data(), out.data(), 8, 33), Error);
}

// The kernels against vec_dot of their own ISA on the unpacked rows (the VNNI one against the
// AVX2 vec_dot): bit-identical, for 1-7 tokens (passes of 4 + 3 included), quantizer rows and
// random bit patterns.
TEST(RepackQ4_0x8, KernelsMatchVecDotExactly) {
  struct Case {
    Isa isa;
    cpu::GemmX8Fn kernel;
    const char* name;
    bool supported;
  };
  const Case cases[] = {
      {Isa::kScalar, cpu::gemm_q4_0x8_ref, "scalar", true},
      {Isa::kAvx2, cpu::gemm_q4_0x8_avx2, "avx2", cpu::isa_supported(Isa::kAvx2)},
      {Isa::kAvx2, cpu::gemm_q4_0x8_vnni, "vnni", cpu::avx512_supported()}};
  for (const Case& c : cases) {
    if (!c.supported) continue;
    const auto kernel = c.kernel;
    const Isa isa = c.isa;
    const cpu::TypeKernels& kq = cpu::kernels(DType::kQ4_0, isa);
    for (int64_t k : kKs) {
      for (bool random_bits : {false, true}) {
        constexpr int64_t kRowsN = 24;
        const size_t rb = row_bytes(DType::kQ4_0, k), xs = row_bytes(DType::kQ8_0, k);
        const auto w = random_bits ? test::random_blocks(DType::kQ4_0, kRowsN * k, 5)
                                   : q4_rows(kRowsN, k, 100);
        const auto p = repacked(w, kRowsN, k);
        for (int64_t n : {1, 2, 3, 4, 5, 7}) {
          auto x = random_bits ? test::random_blocks(DType::kQ8_0, n * k, 9) : q8_rows(n, k, 200);
          // Q8_0 codes are -127..127 (the AVX2 vec_dot's sign trick cannot negate -128).
          for (size_t b = 0; b < x.size(); b += 34)
            for (size_t i = b + 2; i < b + 34; ++i)
              if (x[i] == 0x80) x[i] = 0x81;
          std::vector<float> y(n * kRowsN, -1.0f);
          kernel(k, p.data(), kRowsN / 8, x.data(), xs, n, y.data(), kRowsN);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < kRowsN; ++r)
              ASSERT_EQ(y[t * kRowsN + r], kq.vec_dot(k, w.data() + r * rb, x.data() + t * xs))
                  << c.name << " k=" << k << " n=" << n
                  << " token " << t << " row " << r << (random_bits ? " random bits" : "");
        }
      }
    }
  }
}

// Codes 0 or 15 against activations of -128 or 127 give the largest int16 partial sums the AVX2
// kernel forms (16 products of 15 * 128 = 30720); with d = 1 the dots are exact integers. The
// VNNI kernel gets the same blocks.
TEST(RepackQ4_0x8, LargestBlockSums) {
  if (!cpu::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  std::vector<std::pair<const char*, cpu::GemmX8Fn>> kernels = {{"avx2", cpu::gemm_q4_0x8_avx2}};
  if (cpu::avx512_supported()) kernels.push_back({"vnni", cpu::gemm_q4_0x8_vnni});
  constexpr int64_t kN = 64;
  const size_t rb = row_bytes(DType::kQ4_0, kN), xs = row_bytes(DType::kQ8_0, kN);
  for (int w_code : {0x00, 0xFF}) {
    for (int y_code : {127, -128}) {
      std::vector<uint8_t> w(rb * 8), x(xs);
      for (int64_t b = 0; b < kN / 32 * 8; ++b) {
        w[b * kBlock] = 0x00, w[b * kBlock + 1] = 0x3C;  // d = 1.0 (f16)
        for (int i = 0; i < 16; ++i) w[b * kBlock + 2 + i] = static_cast<uint8_t>(w_code);
      }
      for (int64_t b = 0; b < kN / 32; ++b) {
        x[b * 34] = 0x00, x[b * 34 + 1] = 0x3C;
        for (int i = 0; i < 32; ++i) x[b * 34 + 2 + i] = static_cast<uint8_t>(y_code);
      }
      const auto p = repacked(w, 8, kN);
      for (const auto& [name, kernel] : kernels) {
        float y[8];
        kernel(kN, p.data(), 1, x.data(), xs, 1, y, 8);
        for (int r = 0; r < 8; ++r)
          EXPECT_EQ(y[r], static_cast<float>(kN * ((w_code & 0xF) - 8) * y_code))
              << name << " row " << r;
      }
    }
  }
}

// matmul and embed_rows on a Q4_0x8 tensor give exactly what the Q4_0 original's dot kernels
// give: decode, batched decode (3 and 8 tokens) and prefill (17 and 40 tokens, on the same
// integer kernels, where plain Q4_0 would take sgemm), tails included.
TEST(RepackQ4_0x8, MatmulAndEmbedRowsMatchTheOriginal) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t rows : {8, 37, 64, 133}) {
      constexpr int64_t k = 96;
      auto w = q4_rows(rows, k, 300);
      auto p = repacked(w, rows, k);
      const Tensor tw(DType::kQ4_0, {rows, k}, w.data());
      const Tensor tp(DType::kQ4_0x8, {rows, k}, p.data());
      for (int64_t n : {1, 3, 8, 17, 40}) {
        const auto [a, b] = test::matmul_both(tw, tp, n, pool);
        ASSERT_EQ(a, b) << "rows=" << rows << " tokens=" << n << " threads=" << threads;
      }
      auto [ea, eb] = test::embed_both(tw, tp);
      EXPECT_EQ(ea, eb) << "rows=" << rows;
      EXPECT_THROW(embed_rows(tp, std::vector<int32_t>{static_cast<int32_t>(rows)}, eb.data()),
                   Error);
    }
  }
}

TEST(RepackQ4_0x8, IsNotAFileType) {
  EXPECT_EQ(traits(DType::kQ4_0x8).block_bytes, traits(DType::kQ4_0).block_bytes);
  EXPECT_FALSE(dtype_traits(static_cast<uint32_t>(DType::kQ4_0x8)).has_value());
  EXPECT_FALSE(dtype_from_name("q4_0x8").has_value());
}

}  // namespace
}  // namespace nexus
