// Q8_0x8, Q5_0x8, Q4_Kx8 and Q6_Kx8 (load-time repacked layouts, backends/cpu/repack.h; Q4_0x8 has
// its own file): the byte layouts against the header, round trips, scalar and AVX2 kernels
// bit-identical to each other and within f32 rounding of a double-precision dot of the dequantized
// rows, the largest integer sums, and every consumer (matmul at 1-40 tokens and 1-3 threads,
// prefill included, embed_rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/blocks.h"
#include "backends/cpu/gemm_blas.h"
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

constexpr size_t kBlock = 144;  // bytes of a Q4_K super-block

using Layout = cpu::RepackedLayout;
// The layouts this file tests, from the one table (Q4_0x8 has its own file, with exact vec_dot
// parity).
const Layout& kQ4_K = *cpu::layout_of_base(DType::kQ4_K);
const Layout& kQ6_K = *cpu::layout_of_base(DType::kQ6_K);
const Layout& kQ8_0 = *cpu::layout_of_base(DType::kQ8_0);
const Layout& kQ5_0 = *cpu::layout_of_base(DType::kQ5_0);
const Layout* const kLayouts[] = {&kQ4_K, &kQ6_K, &kQ8_0, &kQ5_0};

std::vector<uint8_t> repacked(const Layout& l, const std::vector<uint8_t>& w, int64_t rows,
                              int64_t k) {
  std::vector<uint8_t> p(w.size());
  l.repack(w.data(), p.data(), rows, k);
  return p;
}

const std::vector<int64_t> kRowCounts = {8, 13, 16, 37};
const std::vector<int64_t> kKs = {256, 768, 2048};

// Walks every block of the repacked image of random {rows, k} matrices of l's base type (rows
// from kRowCounts, k from ks): the tail rows must keep their plain blocks; for the others,
// check(column, lane, src, r) compares row r's block src with its column (eight blocks wide, lane
// r % 8). Stops at the first fatal failure, as the ASSERTs inline did.
template <typename Check>
void walk_blocks(const Layout& l, const std::vector<int64_t>& ks, const Check& check) {
  const int64_t block = traits(l.base).block_size;
  const size_t bb = row_bytes(l.base, block);
  for (int64_t rows : kRowCounts) {
    for (int64_t k : ks) {
      const size_t rb = row_bytes(l.base, k);
      const auto w = test::random_blocks(l.base, rows * k, 7);
      const auto p = repacked(l, w, rows, k);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k / block; ++i) {
          const uint8_t* src = w.data() + r * rb + i * bb;
          if (r >= rows / 8 * 8) {
            ASSERT_EQ(std::memcmp(p.data() + r * rb + i * bb, src, bb), 0) << "tail " << r;
            continue;
          }
          check(p.data() + (r / 8) * 8 * rb + i * 8 * bb, r % 8, src, r);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

// Every byte lands where repack.h says, computed here from the formula, not from the code's
// helpers.
TEST(RepackQ4_Kx8, LayoutFollowsTheHeader) {
  walk_blocks(kQ4_K, kKs, [](const uint8_t* col, int64_t l, const uint8_t* src, int64_t r) {
    ASSERT_EQ(std::memcmp(col + 2 * l, src, 2), 0) << "d row " << r;
    ASSERT_EQ(std::memcmp(col + 16 + 2 * l, src + 2, 2), 0) << "dmin row " << r;
    for (int w4 = 0; w4 < 3; ++w4)
      ASSERT_EQ(std::memcmp(col + 32 + 32 * w4 + 4 * l, src + 4 + 4 * w4, 4), 0)
          << "scales row " << r;
    for (int c = 0; c < 4; ++c)
      for (int v = 0; v < 8; ++v)
        ASSERT_EQ(std::memcmp(col + 128 + 32 * (8 * c + v) + 4 * l, src + 16 + 32 * c + 4 * v, 4), 0)
            << "codes row " << r << " chunk " << c << " vector " << v;
  });
}

// Q6_Kx8 likewise (BlockQ6_K: ql at 0, qh at 128, scales at 192, d at 208).
TEST(RepackQ6_Kx8, LayoutFollowsTheHeader) {
  walk_blocks(kQ6_K, kKs, [](const uint8_t* col, int64_t l, const uint8_t* src, int64_t r) {
    ASSERT_EQ(std::memcmp(col + 2 * l, src + 208, 2), 0) << "d row " << r;
    for (int q = 0; q < 8; ++q)
      ASSERT_EQ(std::memcmp(col + 16 + 16 * q + 2 * l, src + 192 + 2 * q, 2), 0)
          << "scales row " << r << " pair " << q;
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) {
        for (int a = 0; a < 2; ++a)
          ASSERT_EQ(std::memcmp(col + 144 + 32 * (((2 * h + a) * 2 + e) * 4 + l % 4) + 16 * (l / 4),
                                src + 64 * h + 32 * a + 16 * e, 16),
                    0)
              << "ql row " << r;
        ASSERT_EQ(std::memcmp(col + 1168 + 32 * ((2 * h + e) * 4 + l % 4) + 16 * (l / 4),
                              src + 128 + 32 * h + 16 * e, 16),
                  0)
            << "qh row " << r;
      }
  });
}

TEST(RepackK, RowsUnpackAndDequantizeToTheOriginal) {
  for (const Layout* lp : kLayouts) {
    const Layout& l = *lp;
    const std::string name(dtype_name(l.packed));
    for (int64_t rows : kRowCounts) {
      for (int64_t k : kKs) {
        const size_t rb = row_bytes(l.base, k);
        const auto w = test::random_blocks(l.base, rows * k, 11);
        const auto p = repacked(l, w, rows, k);
        std::vector<uint8_t> row(rb);
        std::vector<float> a(k), b(k);
        for (int64_t r = 0; r < rows; ++r) {
          l.unpack_row(p.data(), rows, k, r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.data() + r * rb, rb), 0) << name << " row " << r;
          cpu::dequantize_row(l.base, w.data() + r * rb, a.data(), k);
          cpu::dequantize_matrix_row(l.packed, p.data(), rows, k, r, b.data());
          ASSERT_EQ(std::memcmp(a.data(), b.data(), k * sizeof(float)), 0) << name << " row " << r;
        }
      }
    }
    std::vector<uint8_t> w(8 * row_bytes(l.base, 256)), out(row_bytes(l.base, 256));
    EXPECT_THROW(l.unpack_row(w.data(), 8, 256, 8, out.data()), Error) << name;
    EXPECT_THROW(l.repack(w.data(), out.data(), 8, 200), Error) << name;
  }
}

// Scalar, AVX2 and (where the CPU has AVX512-VNNI) VNNI kernels: bit-identical to each other for
// 1-7 tokens (passes of 4 + 3), and each
// output within f32 accumulation error of the double dot of the dequantized row and activation.
TEST(RepackK, KernelsAgreeAndMatchTheDequantizedDot) {
  for (const Layout* lp : kLayouts) {
    const Layout& l = *lp;
    const std::string name(dtype_name(l.packed));
    for (int64_t k : kKs) {
      for (bool random_bits : {false, true}) {
        constexpr int64_t kRowsN = 24;
        const DType xt = cpu::vec_dot_type(l.base);
        const size_t rb = row_bytes(l.base, k), xs = row_bytes(xt, k);
        const auto w = random_bits ? test::random_blocks(l.base, kRowsN * k, 5)
                                   : test::quantized_rows(l.base, kRowsN, k, 100);
        const auto p = repacked(l, w, kRowsN, k);
        for (int64_t n : {1, 2, 3, 4, 5, 7}) {
          auto x =
              random_bits ? test::random_blocks(xt, n * k, 9) : test::quantized_rows(xt, n, k, 200);
          // Q8_0 activations are -127..127 (the sign trick cannot negate -128; the quantizer
          // never writes it).
          if (xt == DType::kQ8_0)
            for (size_t b = 0; b < x.size(); b += 34)
              for (size_t i = b + 2; i < b + 34; ++i)
                if (x[i] == 0x80) x[i] = 0x81;
          std::vector<float> ref(n * kRowsN, -1.0f), simd(n * kRowsN, -2.0f);
          l.ref(k, p.data(), kRowsN / 8, x.data(), xs, n, ref.data(), kRowsN);
          if (cpu::isa_supported(Isa::kAvx2)) {
            l.avx2(k, p.data(), kRowsN / 8, x.data(), xs, n, simd.data(), kRowsN);
            for (size_t i = 0; i < ref.size(); ++i)
              ASSERT_EQ(simd[i], ref[i]) << name << " k=" << k << " n=" << n << " output " << i
                                         << (random_bits ? " random bits" : "");
          }
          if (l.vnni != nullptr && cpu::avx512_supported()) {
            std::vector<float> vnni(n * kRowsN, -3.0f);
            l.vnni(k, p.data(), kRowsN / 8, x.data(), xs, n, vnni.data(), kRowsN);
            for (size_t i = 0; i < ref.size(); ++i)
              ASSERT_EQ(vnni[i], ref[i]) << name << " vnni k=" << k << " n=" << n << " output "
                                         << i << (random_bits ? " random bits" : "");
          }
          std::vector<float> wf(k), xf(k);
          for (int64_t t = 0; t < n; ++t) {
            cpu::dequantize_row(xt, x.data() + t * xs, xf.data(), k);
            for (int64_t r = 0; r < kRowsN; ++r) {
              cpu::dequantize_row(l.base, w.data() + r * rb, wf.data(), k);
              const test::DotRef d = test::dot_ref(wf.data(), xf.data(), k);
              // The dequantized weights round d * sc (and dmin * m) to f32 first; the kernels do
              // not, so allow a few ulps of the magnitude on top of the accumulation error.
              const double tol = 2e-6 * d.abs + 1e-30;
              ASSERT_NEAR(ref[t * kRowsN + r], d.dot, tol)
                  << name << " k=" << k << " n=" << n << " token " << t << " row " << r
                  << (random_bits ? " random bits" : "");
            }
          }
        }
      }
    }
  }
}

// Codes 15 against activations of -128 or 127 with scales and mins 63 give the largest int16
// partial sums (four products of 15 * 128 per maddubs lane pair, eight per vpdpbusd pair) and the
// largest int32 sums the kernels form; with d = dmin = 1 and d_y = 1 the results are exact.
TEST(RepackQ4_Kx8, LargestSums) {
  constexpr int64_t kN = 512;
  const size_t rb = row_bytes(DType::kQ4_K, kN), xs = row_bytes(DType::kQ8_K, kN);
  for (int y_code : {127, -128}) {
    for (int mn : {0, 63}) {
      std::vector<uint8_t> w(rb * 8), x(xs);
      for (int64_t b = 0; b < kN / 256 * 8; ++b) {
        auto* blk = reinterpret_cast<cpu::BlockQ4_K*>(w.data() + b * kBlock);
        blk->d = 0x3C00, blk->dmin = 0x3C00;  // 1.0
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; ++j) sc[j] = 63, m[j] = static_cast<uint8_t>(mn);
        cpu::pack_scales_mins_k4(sc, m, blk->scales);
        std::memset(blk->qs, 0xFF, sizeof(blk->qs));
      }
      for (int64_t b = 0; b < kN / 256; ++b) {
        auto* blk = reinterpret_cast<cpu::BlockQ8_K*>(x.data() + b * sizeof(cpu::BlockQ8_K));
        blk->d = 1.0f;
        std::memset(blk->qs, y_code & 0xFF, sizeof(blk->qs));
        for (int g = 0; g < 16; ++g) blk->bsums[g] = static_cast<int16_t>(16 * y_code);
      }
      const auto p = repacked(kQ4_K, w, 8, kN);
      const float want = static_cast<float>(kN * 63 * 15 * y_code - kN * mn * y_code);
      for (int kernel = 0; kernel < 3; ++kernel) {
        if (kernel == 1 && !cpu::isa_supported(Isa::kAvx2)) continue;
        if (kernel == 2 && !cpu::avx512_supported()) continue;
        const cpu::GemmX8Fn fn = kernel == 0   ? cpu::gemm_q4_kx8_ref
                                 : kernel == 1 ? cpu::gemm_q4_kx8_avx2
                                               : cpu::gemm_q4_kx8_vnni;
        float y[8];
        fn(kN, p.data(), 1, x.data(), xs, 1, y, 8);
        for (int r = 0; r < 8; ++r)
          EXPECT_EQ(y[r], want) << "kernel " << kernel << " y=" << y_code << " m=" << mn
                                << " row " << r;
      }
    }
  }
}

// Q6_K codes 0 or 63 against activations of -128 or 127 with scales -128 or 127: the largest
// maddubs pairs (2 * 63 * 128) and int32 sums; with d = 1 and d_y = 1 the results are exact.
TEST(RepackQ6_Kx8, LargestSums) {
  constexpr int64_t kN = 512;
  const size_t rb = row_bytes(DType::kQ6_K, kN), xs = row_bytes(DType::kQ8_K, kN);
  for (int code : {0, 63}) {
    for (int y_code : {127, -128}) {
      for (int sc : {127, -128}) {
        std::vector<uint8_t> w(rb * 8), x(xs);
        for (int64_t b = 0; b < kN / 256 * 8; ++b) {
          auto* blk = reinterpret_cast<cpu::BlockQ6_K*>(w.data() + b * 210);
          std::memset(blk->ql, code == 63 ? 0xFF : 0x00, sizeof(blk->ql));
          std::memset(blk->qh, code == 63 ? 0xFF : 0x00, sizeof(blk->qh));
          for (int8_t& s : blk->scales) s = static_cast<int8_t>(sc);
          blk->d = 0x3C00;  // 1.0
        }
        for (int64_t b = 0; b < kN / 256; ++b) {
          auto* blk = reinterpret_cast<cpu::BlockQ8_K*>(x.data() + b * sizeof(cpu::BlockQ8_K));
          blk->d = 1.0f;
          std::memset(blk->qs, y_code & 0xFF, sizeof(blk->qs));
          for (int g = 0; g < 16; ++g) blk->bsums[g] = static_cast<int16_t>(16 * y_code);
        }
        const auto p = repacked(kQ6_K, w, 8, kN);
        const float want = static_cast<float>(int64_t{kN} * (code - 32) * y_code * sc);
        for (int kernel = 0; kernel < 3; ++kernel) {
          if (kernel == 1 && !cpu::isa_supported(Isa::kAvx2)) continue;
          if (kernel == 2 && !cpu::avx512_supported()) continue;
          const cpu::GemmX8Fn fn = kernel == 0   ? cpu::gemm_q6_kx8_ref
                                   : kernel == 1 ? cpu::gemm_q6_kx8_avx2
                                                 : cpu::gemm_q6_kx8_vnni;
          float y[8];
          fn(kN, p.data(), 1, x.data(), xs, 1, y, 8);
          for (int r = 0; r < 8; ++r)
            EXPECT_EQ(y[r], want) << "kernel " << kernel << " code=" << code << " y=" << y_code
                                  << " sc=" << sc << " row " << r;
        }
      }
    }
  }
}

// Q8_0x8: every byte where repack.h says (BlockQ8_0: d at 0, codes at 2).
TEST(RepackQ8_0x8, LayoutFollowsTheHeader) {
  walk_blocks(
      kQ8_0, {32, 96, 1024}, [](const uint8_t* col, int64_t l, const uint8_t* src, int64_t r) {
        ASSERT_EQ(std::memcmp(col + 2 * l, src, 2), 0) << "d row " << r;
        for (int e = 0; e < 2; ++e)
          ASSERT_EQ(
              std::memcmp(col + 16 + 32 * (2 * (l % 4) + e) + 16 * (l / 4), src + 2 + 16 * e, 16),
              0)
              << "codes row " << r << " half " << e;
      });
}

// Weight codes -128 (which the sign trick takes as magnitude 128, the VNNI flip as 0) or 127
// against activations of -127 or 127: the largest maddubs pairs (2 * 128 * 127) and vpdpbusd
// products (255 * 127); with d = d_y = 1 the dots are exact.
TEST(RepackQ8_0x8, LargestSums) {
  constexpr int64_t kN = 64;
  const size_t rb = row_bytes(DType::kQ8_0, kN);
  for (int w_code : {-128, 127}) {
    for (int y_code : {-127, 127}) {
      std::vector<uint8_t> w(rb * 8), x(rb);
      for (int64_t b = 0; b < kN / 32 * 8; ++b) {
        w[b * 34] = 0x00, w[b * 34 + 1] = 0x3C;  // 1.0
        std::memset(&w[b * 34 + 2], w_code & 0xFF, 32);
      }
      for (int64_t b = 0; b < kN / 32; ++b) {
        x[b * 34] = 0x00, x[b * 34 + 1] = 0x3C;
        std::memset(&x[b * 34 + 2], y_code & 0xFF, 32);
      }
      const auto p = repacked(kQ8_0, w, 8, kN);
      for (int kernel = 0; kernel < 3; ++kernel) {
        if (kernel == 1 && !cpu::isa_supported(Isa::kAvx2)) continue;
        if (kernel == 2 && !cpu::avx512_supported()) continue;
        const cpu::GemmX8Fn fn = kernel == 0   ? cpu::gemm_q8_0x8_ref
                                 : kernel == 1 ? cpu::gemm_q8_0x8_avx2
                                               : cpu::gemm_q8_0x8_vnni;
        float y[8];
        fn(kN, p.data(), 1, x.data(), rb, 1, y, 8);
        for (int r = 0; r < 8; ++r)
          EXPECT_EQ(y[r], static_cast<float>(kN * w_code * y_code))
              << "kernel " << kernel << " row " << r;
      }
    }
  }
}

// Q5_0x8: every byte where repack.h says (BlockQ5_0: d at 0, qh at 2, qs at 6).
TEST(RepackQ5_0x8, LayoutFollowsTheHeader) {
  walk_blocks(kQ5_0, {32, 96, 1024},
              [](const uint8_t* col, int64_t l, const uint8_t* src, int64_t r) {
                ASSERT_EQ(std::memcmp(col + 2 * l, src, 2), 0) << "d row " << r;
                ASSERT_EQ(std::memcmp(col + 16 + 4 * l, src + 2, 4), 0) << "qh row " << r;
                ASSERT_EQ(std::memcmp(col + 48 + 32 * (l % 4) + 16 * (l / 4), src + 6, 16), 0)
                    << "qs row " << r;
              });
}

// Codes 31 (value 15) or 0 (value -16) against activations of -128 or 127: the largest products
// and sums every kernel forms (maddubs pairs of 2 * 31 * 128, the -16 * sum(y) start); with
// d = d_y = 1 the dots are exact.
TEST(RepackQ5_0x8, LargestSums) {
  constexpr int64_t kN = 64;
  const size_t rb = row_bytes(DType::kQ5_0, kN), xs = row_bytes(DType::kQ8_0, kN);
  for (int code : {0, 31}) {
    for (int y_code : {-128, 127}) {
      std::vector<uint8_t> w(rb * 8), x(xs);
      for (int64_t b = 0; b < kN / 32 * 8; ++b) {
        uint8_t* blk = &w[b * 22];
        blk[0] = 0x00, blk[1] = 0x3C;  // 1.0
        std::memset(blk + 2, code >= 16 ? 0xFF : 0x00, 4);
        std::memset(blk + 6, (code & 0x0F) * 0x11, 16);
      }
      for (int64_t b = 0; b < kN / 32; ++b) {
        x[b * 34] = 0x00, x[b * 34 + 1] = 0x3C;
        std::memset(&x[b * 34 + 2], y_code & 0xFF, 32);
      }
      const auto p = repacked(kQ5_0, w, 8, kN);
      for (int kernel = 0; kernel < 3; ++kernel) {
        if (kernel == 1 && !cpu::isa_supported(Isa::kAvx2)) continue;
        if (kernel == 2 && !cpu::avx512_supported()) continue;
        const cpu::GemmX8Fn fn = kernel == 0   ? cpu::gemm_q5_0x8_ref
                                 : kernel == 1 ? cpu::gemm_q5_0x8_avx2
                                               : cpu::gemm_q5_0x8_vnni;
        float y[8];
        fn(kN, p.data(), 1, x.data(), xs, 1, y, 8);
        for (int r = 0; r < 8; ++r)
          EXPECT_EQ(y[r], static_cast<float>(kN * (code - 16) * y_code))
              << "kernel " << kernel << " code " << code << " y " << y_code << " row " << r;
      }
    }
  }
}

// matmul on a repacked tensor against the original's dot kernels: decode (1 token), batched
// decode (3 and 8) and prefill (17 and 40 tokens, on the same integer kernels, where the plain
// layout would take sgemm) within f32 rounding, embed_rows exactly; tails and 1-3 threads
// included.
TEST(RepackK, MatmulAndEmbedRowsMatchTheOriginal) {
  for (const Layout* lp : kLayouts) {
    const Layout& l = *lp;
    const std::string name(dtype_name(l.packed));
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t rows : {8, 37, 64, 133}) {
        constexpr int64_t k = 512;
        auto w = test::quantized_rows(l.base, rows, k, 300);
        auto p = repacked(l, w, rows, k);
        const Tensor tw(l.base, {rows, k}, w.data());
        const Tensor tp(l.packed, {rows, k}, p.data());
        for (int64_t n : {1, 3, 8, 17, 40}) {
          const auto [a, b] = test::matmul_both(tw, tp, n, pool);
          float scale = 0.0f;
          for (float v : a) scale = std::max(scale, std::fabs(v));
          for (size_t i = 0; i < a.size(); ++i)
            ASSERT_NEAR(a[i], b[i], 1e-5f * scale) << name << " rows=" << rows << " tokens=" << n
                                                   << " threads=" << threads << " i=" << i;
        }
        const auto [ea, eb] = test::embed_both(tw, tp);
        EXPECT_EQ(ea, eb) << name << " rows=" << rows;
      }
    }
  }
}

// Every layout of the table: an in-memory type of its base's block shape that no file can
// name, found both ways, and nothing else is repacked.
TEST(RepackK, TheTableOfLayouts) {
  EXPECT_EQ(cpu::repacked_layouts().size(), 5u);
  for (const Layout& l : cpu::repacked_layouts()) {
    const std::string name(dtype_name(l.packed));
    EXPECT_EQ(traits(l.packed).block_bytes, traits(l.base).block_bytes) << name;
    EXPECT_EQ(traits(l.packed).block_size, traits(l.base).block_size) << name;
    EXPECT_FALSE(dtype_traits(static_cast<uint32_t>(l.packed)).has_value()) << name;
    EXPECT_EQ(cpu::layout_of_packed(l.packed), &l) << name;
    EXPECT_EQ(cpu::layout_of_base(l.base), &l) << name;
    EXPECT_TRUE(cpu::is_repacked(l.packed)) << name;
    EXPECT_EQ(cpu::base_type(l.packed), l.base) << name;
  }
  for (DType t : {DType::kF32, DType::kF16, DType::kQ5_K, DType::kQ4_1}) {
    EXPECT_EQ(cpu::layout_of_base(t), nullptr) << dtype_name(t);
    EXPECT_FALSE(cpu::is_repacked(t)) << dtype_name(t);
    EXPECT_EQ(cpu::base_type(t), t) << dtype_name(t);
  }
  EXPECT_FALSE(dtype_from_name("q4_kx8").has_value());
  EXPECT_FALSE(dtype_from_name("q6_kx8").has_value());
  EXPECT_FALSE(dtype_from_name("q8_0x8").has_value());
}

}  // namespace
}  // namespace nexus
