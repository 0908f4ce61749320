// Finite-difference checks of every training op's backward (train/train_ops.h) on tiny, odd
// shapes: the scalar loss sum(out * R) for a fixed random R is differentiated numerically (central
// differences, summed in double) and compared with the analytic gradient of each input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "train/train_ops.h"
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
  rope_table(cs.data(), t, rope_dim, 100.0f);
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
  std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t), scratch(s.t);
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

TEST(TrainOpsGrad, AttentionThreadedIsBitIdentical) {
  const AttnShape s{3, 7, 6, 2, 5};
  const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  auto q = randn(n * qw, 19), k = randn(n * kvw, 20), v = randn(n * kvw, 21), r = randn(n * qw, 22);
  auto run = [&](ThreadPool* pool) {
    const int threads = pool ? pool->size() : 1;
    std::vector<float> out(n * qw), att(s.b * s.n_heads * s.t * s.t), scratch(threads * s.t);
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
    EXPECT_EQ(run(&pool), serial) << threads << " threads";
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
    embedding_forward(out.data(), tokens.data(), table.data(), n, c);
    return weighted_sum(out, r);
  };
  embedding_backward(dtable.data(), r.data(), tokens.data(), n, c);
  EXPECT_LT(fd_error("embedding d table", table, dtable, loss), kTol);
  EXPECT_EQ(dtable[1 * c], 0.0f);  // an unused row gets no gradient
}

TEST(TrainOpsGrad, CrossEntropyWithIgnoredTarget) {
  const int64_t n = 4, v = 7;
  const std::vector<int32_t> targets = {2, -1, 6, 0};
  auto logits = randn(n * v, 18, 3.0f);
  std::vector<float> lse(n);
  int64_t count = 0;
  auto loss = [&] {
    return static_cast<double>(
        cross_entropy_forward(lse.data(), logits.data(), targets.data(), n, v, &count));
  };
  const double l0 = loss();
  EXPECT_EQ(count, 3);
  // Direct check of the value: mean over counted rows of lse - logit[target].
  double want = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(logits[i * v + j]));
    want += std::log(s) - logits[i * v + targets[i]];
  }
  EXPECT_NEAR(l0, want / 3.0, 1e-6);
  std::vector<float> grad = logits;
  cross_entropy_backward(grad.data(), lse.data(), targets.data(), n, v, count);
  // The loss is a single f32 value here, so a larger step keeps rounding out of the difference.
  EXPECT_LT(fd_error("cross-entropy d logits", logits, grad, loss, 1e-2f), 5e-3);
  for (int64_t j = 0; j < v; ++j) EXPECT_EQ(grad[1 * v + j], 0.0f);
}

}  // namespace
}  // namespace nexus::train
