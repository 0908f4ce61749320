// matmul, the f32 matvec op and embed_rows against naive references for every weight dtype, at odd
// row and token counts and 1/2/3 threads; prefill on our GEMM independent of the thread count; plus
// the argument checks and their error messages.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/gemm_blas.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/matvec.h"
#include "parity/quant_test_util.h"

namespace nexus {
namespace {

// Row length per dtype: 3 blocks (odd for the plain float types).
int64_t test_k(DType t) {
  const int64_t bs = traits(t).block_size;
  return bs == 1 ? 67 : (bs == 32 ? 96 : 512);
}

struct Weights {
  Tensor w;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // dequantized rows
};
Weights make_weights(DType t, int64_t rows, int64_t k, uint32_t seed) {
  Weights m;
  m.bytes = test::quantize(t, test::random_floats(rows * k, seed));
  m.deq = test::dequantize(t, m.bytes, rows * k);
  m.w = Tensor(t, {rows, k}, m.bytes.data());
  return m;
}

class MatmulParity : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulParity, MatchesNaiveReference) {
  const DType t = GetParam();
  const DType dt = cpu::vec_dot_type(t);
  const int64_t k = test_k(t);
  // Converting activations to 8 bits costs under 1% of |w||x|; f32 activations only round sums.
  const double tol = dt == DType::kF32 ? 1e-5 : 0.01;
  for (int64_t rows : {1, 7, 37}) {
    const Weights m = make_weights(t, rows, k, 11 + static_cast<uint32_t>(rows));
    for (int64_t n_tokens : {1, 3, 10, 17, 41}) {
      const auto x = test::random_floats(n_tokens * k, 23 + static_cast<uint32_t>(n_tokens), 0.5f);
      // Below kBlasMinTokens matmul calls the same dot kernel on the same converted activations,
      // so it must reproduce the one-by-one dot products bit for bit. From kBlasMinTokens on it
      // multiplies exactly dequantized f32 weights with f32 activations (OpenBLAS sgemm, or our
      // AVX2 GEMM for F32, F16 and BF16: prefill_on_our_gemm), so it must match the reference to
      // f32 rounding.
      const bool blas = matmul_on_blas(t, n_tokens);
      // F32 decode takes four weight rows per pass (dot4), which sums in another order than
      // vec_dot: equal to f32 rounding, not bit for bit.
      const bool reordered = t == DType::kF32 && n_tokens == 1;
      const double path_tol = blas ? 1e-5 : tol;
      std::vector<float> exact(static_cast<size_t>(n_tokens * rows));
      std::vector<uint8_t> xq(row_bytes(dt, k));
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        cpu::quantize_row(dt, x.data() + tok * k, xq.data(), k);
        for (int64_t r = 0; r < rows; ++r)
          exact[tok * rows + r] = cpu::vec_dot(t, k, m.w.row(r), xq.data());
      }
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        Arena scratch(matmul_scratch_bytes(m.w, n_tokens) + 4096, MemCategory::kScratch);
        std::vector<float> y(static_cast<size_t>(n_tokens * rows), -1.0f);
        matmul(m.w, x.data(), n_tokens, y.data(), pool, scratch);
        for (int64_t tok = 0; tok < n_tokens; ++tok) {
          const float* xt = x.data() + tok * k;
          for (int64_t r = 0; r < rows; ++r) {
            const float* wr = m.deq.data() + r * k;
            const double ref = test::dot_ref(wr, xt, k).dot;
            const double bound = path_tol * test::norm2(wr, k) * test::norm2(xt, k) + 1e-30;
            const float got = y[tok * rows + r];
            ASSERT_NEAR(got, ref, bound)
                << dtype_name(t) << " rows=" << rows << " tokens=" << n_tokens
                << " threads=" << threads << " at [" << tok << ", " << r << "]";
            if (!blas && !reordered) {
              ASSERT_EQ(got, exact[tok * rows + r])
                << dtype_name(t) << " [" << tok << ", " << r << "] threads=" << threads;
            }
          }
        }
      }
    }
  }
}

// The dequantizing matvec op (the GPU decode path's reference) keeps x in f32: within f32
// rounding of the dot of the dequantized rows, on any thread count.
TEST_P(MatmulParity, MatvecOpIsTheDequantizedDot) {
  const DType t = GetParam();
  const int64_t k = test_k(t), rows = 37, n = 3;
  const Weights m = make_weights(t, rows, k, 5);
  const auto x = test::random_floats(n * k, 9, 0.5f);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
    matvec(MatvecArgs{m.bytes.data(), t, rows, k, x.data(), n, y.data()}, &pool);
    for (int64_t tok = 0; tok < n; ++tok)
      for (int64_t r = 0; r < rows; ++r) {
        const float *wr = m.deq.data() + r * k, *xt = x.data() + tok * k;
        ASSERT_NEAR(y[tok * rows + r], test::dot_ref(wr, xt, k).dot,
                    1e-5 * test::norm2(wr, k) * test::norm2(xt, k))
            << dtype_name(t) << " [" << tok << ", " << r << "]";
      }
  }
}

TEST_P(MatmulParity, EmbedRowsDequantizesSelectedRows) {
  const DType t = GetParam();
  const int64_t k = test_k(t);
  const int64_t vocab = 9;
  const Weights m = make_weights(t, vocab, k, 99);
  const std::vector<int32_t> ids = {3, 0, 8, 3, 5};
  std::vector<float> out(ids.size() * k);
  embed_rows(m.w, ids, out.data());
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < k; ++j)
      ASSERT_EQ(out[i * k + j], m.deq[ids[i] * k + j]) << dtype_name(t) << " id " << ids[i];
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulParity, ::testing::ValuesIn(test::computable_dtypes()),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return test::dtype_test_name(p.param);
                         });

// Prefill on our AVX2 GEMM (F32, F16, BF16): each output is summed in the same order whichever
// thread computes it, so 1, 2 and 3 threads give the same bits (OpenBLAS's Zen kernels round
// differently for different row counts, so the sgemm path does not promise this).
TEST(MatmulPrefill, OurGemmGivesTheSameBitsOnAnyThreadCount) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    if (!cpu::prefill_on_our_gemm(t)) GTEST_SKIP() << "prefill is not on our GEMM on this CPU";
    const int64_t rows = 301, k = 389, n_tokens = 41;
    const Weights m = make_weights(t, rows, k, 5);
    const auto x = test::random_floats(n_tokens * k, 6, 0.5f);
    ASSERT_TRUE(matmul_on_blas(t, n_tokens));
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Arena scratch(matmul_scratch_bytes(m.w, n_tokens) + 4096, MemCategory::kScratch);
      std::vector<float> y(static_cast<size_t>(n_tokens * rows), -1.0f);
      matmul(m.w, x.data(), n_tokens, y.data(), pool, scratch);
      if (threads == 1) {
        first = y;
        continue;
      }
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(std::memcmp(&y[i], &first[i], sizeof(float)), 0)
            << dtype_name(t) << " threads=" << threads << " at " << i << ": " << y[i] << " vs "
            << first[i];
    }
  }
}

// Runs fn, expects a nexus::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "expected nexus::Error";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(MatvecChecks, NamesARowThatIsNotWholeBlocks) {
  const std::vector<uint8_t> w(64);
  const std::vector<float> x(40);
  std::vector<float> y(1);
  try {
    matvec(MatvecArgs{w.data(), DType::kQ8_0, 1, 40, x.data(), 1, y.data()});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k 40 is not a multiple of Q8_0's block of 32"),
              std::string::npos)
        << e.what();
  }
}

TEST(MatmulChecks, RejectsBadArguments) {
  ThreadPool pool(1);
  Arena scratch(1 << 16, MemCategory::kScratch);
  std::vector<float> x(256), y(256);
  std::vector<uint8_t> buf(1 << 14);

  const Tensor rank3(DType::kF32, {2, 2, 32}, buf.data());
  expect_error([&] { matmul(rank3, x.data(), 1, y.data(), pool, scratch); },
               {"[matmul]", "2x2x32"});
  const Tensor i8(DType::kI8, {2, 256}, buf.data());
  expect_error([&] { matmul(i8, x.data(), 1, y.data(), pool, scratch); }, {"[matmul]", "I8"});
  const Tensor w(DType::kQ8_0, {4, 64}, buf.data());
  expect_error([&] { matmul(w, x.data(), -1, y.data(), pool, scratch); }, {"[matmul]", "-1"});
  expect_error([&] { matmul(w, nullptr, 2, y.data(), pool, scratch); }, {"[matmul]", "null"});
  const Tensor no_data(DType::kQ8_0, {4, 64}, nullptr);
  expect_error([&] { matmul(no_data, x.data(), 1, y.data(), pool, scratch); },
               {"[matmul]", "no data"});
  Arena tiny(64, MemCategory::kScratch);
  expect_error([&] { matmul(w, x.data(), 4, y.data(), pool, tiny); }, {"[arena]"});
  // Zero tokens is a no-op.
  matmul(w, x.data(), 0, y.data(), pool, scratch);
}

TEST(EmbedChecks, RejectsOutOfRangeIds) {
  std::vector<float> table(5 * 8, 1.0f), out(8 * 4);
  const Tensor t(DType::kF32, {5, 8}, table.data());
  const std::vector<int32_t> too_big = {1, 5};
  expect_error([&] { embed_rows(t, too_big, out.data()); }, {"[embed_rows]", "5", "vocab size 5"});
  const std::vector<int32_t> negative = {-3};
  expect_error([&] { embed_rows(t, negative, out.data()); }, {"[embed_rows]", "-3"});
  const Tensor flat(DType::kF32, {40}, table.data());
  const std::vector<int32_t> ok = {0};
  expect_error([&] { embed_rows(flat, ok, out.data()); }, {"[embed_rows]", "2-D"});
}

}  // namespace
}  // namespace nexus
