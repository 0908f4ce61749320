// Finite-difference checks of every training op's backward (ops/train_ops.h) on tiny, odd
// shapes: the scalar loss sum(out * R) for a fixed random R is differentiated numerically (central
// differences, summed in double) and compared with the analytic gradient of each input.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "nexus/core/thread_pool.h"
#include "nexus/train/precision.h"
#include "ops/round.h"
#include "ops/rope.h"
#include "ops/train_ops.h"
#include "unit/train_grad_util.h"

namespace nexus::train {
namespace {

constexpr double kTol = 2e-3;  // f32 forward, h = 1e-3: measured errors are ~1e-4 and below

TEST(TrainOpsGrad, Matmul) {
  const int64_t n = 5, c = 7, oc = 3;
  auto inp = randn(n * c, 1), w = randn(oc * c, 2), r = randn(n * oc, 3);
  std::vector<float> out(n * oc), dinp(n * c, 0.0f), dw(oc * c, 0.0f);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), w.data(), n, c, oc);
    return weighted_sum(out, r);
  };
  matmul_backward(dinp.data(), dw.data(), r.data(), inp.data(), w.data(), n, c, oc);
  EXPECT_LT(fd_error("matmul d input", inp, dinp, loss), kTol);
  EXPECT_LT(fd_error("matmul d weight", w, dw, loss), kTol);
}

TEST(TrainOpsGrad, RmsNorm) {
  const int64_t n = 3, c = 10;
  auto x = randn(n * c, 4), w = randn(c, 5), r = randn(n * c, 6);
  for (float& v : w) v += 1.0f;
  std::vector<float> out(n * c), rstd(n), dx(n * c, 0.0f), dw(c, 0.0f);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f);
    return weighted_sum(out, r);
  };
  loss();
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), n, c);
  EXPECT_LT(fd_error("rmsnorm d x", x, dx, loss), kTol);
  EXPECT_LT(fd_error("rmsnorm d weight", w, dw, loss), kTol);
}

TEST(TrainOpsGrad, RopeBothStylesPartialDims) {
  const int64_t b = 2, t = 3, heads = 2, hd = 8, rope_dim = 6;
  std::vector<float> cs(t * rope_dim);
  const int32_t pos[t] = {0, 1, 2};
  nexus::rope_table(pos, t, rope_dim, 100.0f, cs.data());
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    auto x = randn(b * t * heads * hd, 7), r = randn(x.size(), 8);
    std::vector<float> y(x.size());
    auto loss = [&] {
      y = x;
      rope_rotate(y.data(), b * t, t, heads, hd, rope_dim, style, cs.data(), false);
      return weighted_sum(y, r);
    };
    std::vector<float> dx = r;  // the backward is the inverse rotation of the upstream gradient
    rope_rotate(dx.data(), b * t, t, heads, hd, rope_dim, style, cs.data(), true);
    EXPECT_LT(
        fd_error(style == RopeStyle::kNormal ? "rope (pairs) d x" : "rope (neox) d x", x, dx, loss),
        kTol);
  }
}

TEST(TrainOpsGrad, CausalGqaAttention) {
  const AttnShape s{2, 5, 4, 2, 3};
  const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  auto q = randn(n * qw, 9), k = randn(n * kvw, 10), v = randn(n * kvw, 11), r = randn(n * qw, 12);
  std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t),
      scratch(attention_backward_scratch(s.t));
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    return weighted_sum(out, r);
  };
  loss();
  // The causal mask: the first token of each sequence sees only itself.
  EXPECT_FLOAT_EQ(att[0], 1.0f);
  EXPECT_EQ(att[1], 0.0f);
  attention_backward(dq.data(), dk.data(), dv.data(), r.data(), att.data(), q.data(), k.data(),
                     v.data(), s, scratch.data());
  EXPECT_LT(fd_error("attention d q", q, dq, loss), kTol);
  EXPECT_LT(fd_error("attention d k", k, dk, loss), kTol);
  EXPECT_LT(fd_error("attention d v", v, dv, loss), kTol);
}

// Head size 16 takes the AVX2 kernels where the CPU has them (hd 3 above is always scalar).
TEST(TrainOpsGrad, CausalGqaAttentionVectorHeads) {
  const AttnShape s{1, 6, 2, 1, 16};
  const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  auto q = randn(n * qw, 29), k = randn(n * kvw, 30), v = randn(n * kvw, 31), r = randn(n * qw, 32);
  std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t),
      scratch(attention_backward_scratch(s.t));
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    return weighted_sum(out, r);
  };
  loss();
  attention_backward(dq.data(), dk.data(), dv.data(), r.data(), att.data(), q.data(), k.data(),
                     v.data(), s, scratch.data());
  EXPECT_LT(fd_error("attention/16 d q", q, dq, loss), kTol);
  EXPECT_LT(fd_error("attention/16 d k", k, dk, loss), kTol);
  EXPECT_LT(fd_error("attention/16 d v", v, dv, loss), kTol);
}

// A sliding window of 3 over 7 tokens, head size 3 (scalar kernels) and 16 (AVX2 where the CPU has
// it): keys before the window get probability 0, and every gradient matches finite differences.
TEST(TrainOpsGrad, SlidingWindowAttention) {
  for (int64_t hd : {3, 16}) {
    const AttnShape s{2, 7, 4, 2, hd, 3};
    const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
    auto q = randn(n * qw, 41), k = randn(n * kvw, 42), v = randn(n * kvw, 43),
         r = randn(n * qw, 44);
    std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t),
        scratch(attention_backward_scratch(s.t));
    std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
    auto loss = [&] {
      attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
      return weighted_sum(out, r);
    };
    loss();
    // Query 5 of head 0, sequence 0 sees keys 3, 4 and 5 only.
    const float* p5 = att.data() + 5 * s.t;
    EXPECT_EQ(p5[2], 0.0f);
    EXPECT_GT(p5[3], 0.0f);
    EXPECT_NEAR(p5[3] + p5[4] + p5[5], 1.0f, 1e-6f);
    attention_backward(dq.data(), dk.data(), dv.data(), r.data(), att.data(), q.data(), k.data(),
                       v.data(), s, scratch.data());
    const std::string h = "window attention/" + std::to_string(hd);
    EXPECT_LT(fd_error((h + " d q").c_str(), q, dq, loss), kTol);
    EXPECT_LT(fd_error((h + " d k").c_str(), k, dk, loss), kTol);
    EXPECT_LT(fd_error((h + " d v").c_str(), v, dv, loss), kTol);
  }
}

// Norms (with their row-blocked weight gradient), RoPE and SwiGLU split over a pool give the same
// bits as the serial call.
TEST(TrainOpsGrad, RowOpsThreadedAreBitIdentical) {
  const int64_t n = 203, c = 24, t = 29;
  const auto x = randn(n * c, 33), w = randn(c, 34), r = randn(n * c, 35);
  std::vector<float> cs(t * c);
  std::vector<int32_t> pos(t);
  for (int64_t p = 0; p < t; ++p) pos[p] = static_cast<int32_t>(p);
  nexus::rope_table(pos.data(), t, c, 10000.0f, cs.data());
  auto run = [&](ThreadPool* pool) {
    std::vector<float> y(n * c), rstd(n), dx(n * c, 0.0f), dw(c, 0.0f), h(n * c), dg(n * c, 0.0f),
        du(n * c, 0.0f);
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f, pool);
    rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), n, c, pool);
    rope_rotate(y.data(), n, t, 2, c / 2, c / 2, RopeStyle::kNormal, cs.data(), false, pool);
    swiglu_forward(h.data(), y.data(), x.data(), n * c, pool);
    swiglu_backward(dg.data(), du.data(), r.data(), y.data(), x.data(), n * c, pool);
    for (const auto* part : {&rstd, &dx, &dw, &h, &dg, &du})
      y.insert(y.end(), part->begin(), part->end());
    return y;
  };
  const std::vector<float> serial = run(nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(run(&pool), serial) << threads << " threads";
  }
}

// The element-wise ops (SwiGLU, GELU, forward and backward) split over a pool give the serial
// bits. Their AVX2 kernels run 8 or more lanes at a time and a scalar tail whose exp differs in
// the last bit, so a chunk boundary off the lanes changed a few elements: at 3 threads over
// 512 x 256 values (a 2-layer llama's FFN), 1-21 elements of each output differed before the
// chunks were aligned (par::for_aligned).
TEST(TrainOpsGrad, ElementwiseOpsThreadedAreBitIdentical) {
  for (int64_t n : {int64_t{512 * 256}, int64_t{100003}}) {
    const auto a = randn(n, 60), b = randn(n, 61), r = randn(n, 62);
    auto run = [&](ThreadPool* pool) {
      std::vector<float> out(n), dg(n), du(n), ge(n), dge(n);
      swiglu_forward(out.data(), a.data(), b.data(), n, pool);
      swiglu_backward(dg.data(), du.data(), r.data(), a.data(), b.data(), n, pool);
      gelu_forward(ge.data(), a.data(), n, pool);
      gelu_backward(dge.data(), r.data(), a.data(), n, pool);
      for (const auto* part : {&dg, &du, &ge, &dge})
        out.insert(out.end(), part->begin(), part->end());
      return out;
    };
    const std::vector<float> serial = run(nullptr);
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      EXPECT_EQ(run(&pool), serial) << threads << " threads, " << n << " values";
    }
  }
}

// The GEMMs split over a pool (shares of output columns or rows, each its own cpu/gemm_f32.h call)
// give every element exactly what one call gives it: shapes split on 2 and 3 threads with a ragged
// last share, and one small enough to stay whole.
TEST(TrainOpsGrad, MatmulThreadedIsBitIdentical) {
  if (!cpu::gemm_f32_active())
    GTEST_SKIP() << "our f32 GEMM is off: OpenBLAS's results depend on the split (train_ops.cc)";
  openblas_set_num_threads(1);
  // 1040 tokens split by rows on two threads (the d input of the second by columns: c >= 4 oc);
  // the last two are head-like (oc >= 16 c): their d input goes to our pooled GEMM in blocks of
  // rows (the first of them split over the threads, the second too small to split).
  for (auto [n, c, oc] : {std::array<int64_t, 3>{96, 320, 1000},
                          {64, 768, 2304},
                          {19, 97, 501},
                          {1040, 96, 200},
                          {1040, 400, 96},
                          {100, 24, 17000},
                          {16, 40, 40001}}) {
    const auto inp = randn(n * c, 40), w = randn(oc * c, 41), r = randn(n * oc, 42);
    const auto bias = randn(oc, 45);
    auto run = [&](ThreadPool* pool) {
      std::vector<float> out(n * oc), dinp(n * c, 0.5f), dw(oc * c, 0.25f), db(oc, 0.125f);
      matmul_forward(out.data(), inp.data(), w.data(), n, c, oc, pool);
      matmul_backward(dinp.data(), dw.data(), r.data(), inp.data(), w.data(), n, c, oc, pool, false,
                      db.data());
      out.insert(out.end(), dinp.begin(), dinp.end());
      out.insert(out.end(), dw.begin(), dw.end());
      out.insert(out.end(), db.begin(), db.end());
      // Starting from a residual and a bias.
      std::vector<float> filled(n * oc);
      matmul_forward(filled.data(), inp.data(), w.data(), n, c, oc, pool, false, r.data(),
                     bias.data());
      out.insert(out.end(), filled.begin(), filled.end());
      return out;
    };
    const std::vector<float> serial = run(nullptr);
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      EXPECT_EQ(run(&pool), serial) << threads << " threads, " << n << "x" << c << "x" << oc;
    }
  }
}

// The d weight of a head-sized GEMM goes to OpenBLAS in calls of a few thousand rows (so it touches
// less of its buffer), or to ours as dw^T = inp^T dout stored transposed (cpu/gemm_f32.h, trans_c):
// the same bits as one plain call over all rows of the GEMM in use, on one thread and on two.
TEST(TrainOpsGrad, MatmulWeightGradInRowCallsIsOneCall) {
  openblas_set_num_threads(1);
  const int64_t n = 120, c = 96, oc = 9000;
  const auto inp = randn(n * c, 50), r = randn(n * oc, 51);
  std::vector<float> whole(oc * c, 0.5f);
  if (cpu::gemm_f32_active())
    cpu::gemm_f32(true, false, oc, c, n, r.data(), oc, inp.data(), c, true, whole.data(), c);
  else
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(oc), static_cast<int>(c),
                static_cast<int>(n), 1.0f, r.data(), static_cast<int>(oc), inp.data(),
                static_cast<int>(c), 1.0f, whole.data(), static_cast<int>(c));
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> dw(oc * c, 0.5f);
    matmul_backward(nullptr, dw.data(), r.data(), inp.data(), nullptr, n, c, oc, p);
    EXPECT_EQ(dw, whole) << (p ? "two threads" : "one thread");
  }
}

// matmul_forward's starting values (out = add_rows + bias + inp w^T, either left out) against a
// double sum, on a pool (shares of the columns, filled per share).
TEST(TrainOpsGrad, MatmulStartingValues) {
  openblas_set_num_threads(1);
  ThreadPool pool(2);
  for (auto [n, c, oc] : {std::array<int64_t, 3>{37, 300, 500}, {16, 40, 40001}}) {
    const auto inp = randn(n * c, 46), w = randn(oc * c, 47), add = randn(n * oc, 48);
    const auto bias = randn(oc, 49);
    for (int mode = 0; mode < 3; ++mode) {  // add + bias, add only, bias only
      const float* a = mode != 2 ? add.data() : nullptr;
      const float* b = mode != 1 ? bias.data() : nullptr;
      std::vector<float> out(n * oc, NAN);
      matmul_forward(out.data(), inp.data(), w.data(), n, c, oc, &pool, false, a, b);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < oc; o += 97) {
          double ref = (a ? a[i * oc + o] : 0.0) + (b ? b[o] : 0.0);
          for (int64_t k = 0; k < c; ++k) ref += double(inp[i * c + k]) * w[o * c + k];
          ASSERT_NEAR(out[i * oc + o], ref, 1e-4 * std::sqrt(double(c))) << mode << " " << i;
        }
    }
  }
}

// A head-shaped d input (the vocabulary as the inner dimension: our pooled GEMM's blocks of rows,
// or on OpenBLAS chunks whose partial sums are transposed and added in order) matches a
// double-precision sum, on a pool and without one.
TEST(TrainOpsGrad, MatmulHeadInputGradMatchesDouble) {
  openblas_set_num_threads(1);
  // 40 rows: enough to split over two threads; OpenBLAS's partials two blocks of 16 and a part.
  const int64_t n = 40, c = 24, oc = 50257;
  const auto w = randn(oc * c, 43), r = randn(n * oc, 44);
  std::vector<double> ref(n * c, 0.5);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < oc; ++k)
      for (int64_t j = 0; j < c; ++j) ref[i * c + j] += double(r[i * oc + k]) * w[k * c + j];
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> dinp(n * c, 0.5f);
    matmul_backward(dinp.data(), nullptr, r.data(), nullptr, w.data(), n, c, oc, p);
    for (int64_t i = 0; i < n * c; ++i)
      ASSERT_NEAR(dinp[i], ref[i], 2e-4 * std::sqrt(double(oc))) << "element " << i;
  }
}

TEST(TrainOpsGrad, AttentionThreadedIsBitIdentical) {
  for (int64_t hd : {5, 16}) {  // scalar and (where the CPU has it) AVX2 kernels
    const AttnShape s{3, 7, 6, 2, hd};
    const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
    auto q = randn(n * qw, 19), k = randn(n * kvw, 20), v = randn(n * kvw, 21),
         r = randn(n * qw, 22);
    auto run = [&](ThreadPool* pool) {
      const int threads = pool ? pool->size() : 1;
      std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t),
          scratch(threads * attention_backward_scratch(s.t));
      std::vector<float> g(n * qw + 2 * n * kvw, 0.0f);
      attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s, pool);
      attention_backward(g.data(), g.data() + n * qw, g.data() + n * qw + n * kvw, r.data(),
                         att.data(), q.data(), k.data(), v.data(), s, scratch.data(), pool);
      out.insert(out.end(), g.begin(), g.end());
      return out;
    };
    const std::vector<float> serial = run(nullptr);
    for (int threads : {2, 3, 4}) {
      ThreadPool pool(threads);
      EXPECT_EQ(run(&pool), serial) << threads << " threads, head size " << hd;
    }
  }
}

TEST(TrainOpsGrad, SwiGlu) {
  const int64_t n = 23;
  auto g = randn(n, 13, 2.0f), u = randn(n, 14), r = randn(n, 15);
  std::vector<float> out(n), dg(n, 0.0f), du(n, 0.0f);
  auto loss = [&] {
    swiglu_forward(out.data(), g.data(), u.data(), n);
    return weighted_sum(out, r);
  };
  swiglu_backward(dg.data(), du.data(), r.data(), g.data(), u.data(), n);
  EXPECT_LT(fd_error("swiglu d gate", g, dg, loss), kTol);
  EXPECT_LT(fd_error("swiglu d up", u, du, loss), kTol);
}

TEST(TrainOpsGrad, EmbeddingWithRepeatedTokens) {
  const int64_t v = 6, c = 4;
  const std::vector<int32_t> tokens = {0, 3, 3, 5, 3};
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto table = randn(v * c, 16), r = randn(n * c, 17);
  std::vector<float> out(n * c), dtable(v * c, 0.0f);
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), table.data(), v, n, c);
    return weighted_sum(out, r);
  };
  embedding_backward(dtable.data(), r.data(), tokens.data(), n, c);
  EXPECT_LT(fd_error("embedding d table", table, dtable, loss), kTol);
  EXPECT_EQ(dtable[1 * c], 0.0f);  // an unused row gets no gradient
}

TEST(TrainOpsGrad, CrossEntropyWithIgnoredTarget) {
  const int64_t n = 4, v = 37;  // v not a multiple of 8: the AVX2 path's scalar tail runs too
  const std::vector<int32_t> targets = {2, -1, 36, 0};
  auto logits = randn(n * v, 18, 3.0f);
  std::vector<float> row_loss(n), grad(n * v);
  const float scale = 1.0f / 3.0f;
  // The loss as a function of the logits (the fused op overwrites its input, so work on a copy).
  auto loss = [&] {
    grad = logits;
    return scale * cross_entropy_fused(grad.data(), row_loss.data(), targets.data(), n, v, scale);
  };
  const double l0 = loss();
  const std::vector<float> analytic = grad;
  // Direct check of the value: mean over counted rows of lse - logit[target].
  double want = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) {
      EXPECT_EQ(row_loss[i], 0.0f);
      continue;
    }
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(logits[i * v + j]));
    const double row = std::log(s) - logits[i * v + targets[i]];
    EXPECT_NEAR(row_loss[i], row, 1e-5 * std::max(1.0, row));
    want += row;
  }
  EXPECT_NEAR(l0, want / 3.0, 1e-5);
  // The loss is a single f32 value here, so a larger step keeps rounding out of the difference.
  EXPECT_LT(fd_error("cross-entropy d logits", logits, analytic, loss, 1e-2f), 5e-3);
  for (int64_t j = 0; j < v; ++j) EXPECT_EQ(analytic[1 * v + j], 0.0f);
}

TEST(TrainOpsGrad, CrossEntropyThreadedIsBitIdentical) {
  const int64_t n = 37, v = 1003;
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 5 == 3 ? -1 : static_cast<int32_t>(i * 97 % v);
  const auto logits = randn(n * v, 23, 4.0f);
  auto run = [&](ThreadPool* pool) {
    std::vector<float> g = logits, row_loss(n);
    const double total =
        cross_entropy_fused(g.data(), row_loss.data(), targets.data(), n, v, 0.25f, pool);
    g.push_back(static_cast<float>(total));
    return g;
  };
  const std::vector<float> serial = run(nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(run(&pool), serial) << threads << " threads";
  }
}

// With a rounding precision the fused op rounds each row before its loss and its gradient after
// it: the bits of round_to over all the logits, the plain op, then round_to over the gradients
// (the mixed-precision head's passes it replaces), on one thread and on a pool; and the rounding
// does happen (the result differs from the plain op's).
TEST(TrainOpsGrad, CrossEntropyRoundingRowsMatchesRoundingPasses) {
  const int64_t n = 19, v = 1003;
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 7 == 2 ? -1 : static_cast<int32_t>(i * 61 % v);
  const auto logits = randn(n * v, 29, 4.0f);
  for (Precision p : {Precision::kBF16, Precision::kF16}) {
    std::vector<float> want = logits, want_loss(n), plain = logits, plain_loss(n);
    round_to(p, want.data(), n * v);
    const double want_total =
        cross_entropy_fused(want.data(), want_loss.data(), targets.data(), n, v, 0.5f);
    round_to(p, want.data(), n * v);
    cross_entropy_fused(plain.data(), plain_loss.data(), targets.data(), n, v, 0.5f);
    EXPECT_NE(plain, want) << precision_name(p);
    ThreadPool pool(2);
    for (ThreadPool* pl : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> got = logits, got_loss(n);
      const double total =
          cross_entropy_fused(got.data(), got_loss.data(), targets.data(), n, v, 0.5f, pl, p);
      EXPECT_EQ(got, want) << precision_name(p) << (pl ? ", two threads" : ", one thread");
      EXPECT_EQ(got_loss, want_loss) << precision_name(p);
      EXPECT_EQ(total, want_total) << precision_name(p);
    }
  }
}

}  // namespace
}  // namespace nexus::train
