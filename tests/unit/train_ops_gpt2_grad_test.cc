// Finite-difference checks of the gpt2 training ops (ops/train_ops_gpt2.cc): LayerNorm (x, weight,
// bias), tanh GELU, bias add and learned positions, on tiny odd shapes; plus direct checks of the
// forward values against formulas computed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/train_ops.h"
#include "unit/train_grad_util.h"

namespace nexus::train {
namespace {

constexpr double kTol = 2e-3;  // f32 forward, h = 1e-3, as in train_ops_grad_test.cc

TEST(TrainOpsGpt2Grad, LayerNorm) {
  const int64_t n = 3, c = 11;
  auto x = randn(n * c, 31, 2.0f), w = randn(c, 32), b = randn(c, 33), r = randn(n * c, 34);
  for (float& v : x) v += 0.7f;  // a non-zero mean, so the centring matters
  for (float& v : w) v += 1.0f;
  std::vector<float> out(n * c), mean(n), rstd(n), dx(n * c, 0.0f), dw(c, 0.0f), db(c, 0.0f);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                      1e-5f);
    return weighted_sum(out, r);
  };
  loss();
  // Forward value: (x - mean) / sqrt(var + eps) * w + b, in double.
  double m = 0.0, var = 0.0;
  for (int64_t j = 0; j < c; ++j) m += x[c + j];
  m /= c;
  for (int64_t j = 0; j < c; ++j) var += (x[c + j] - m) * (x[c + j] - m);
  var /= c;
  const double want = (x[c + 4] - m) / std::sqrt(var + 1e-5) * w[4] + b[4];
  EXPECT_NEAR(out[c + 4], want, 1e-5 * std::max(1.0, std::abs(want)));
  layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), n, c);
  EXPECT_LT(fd_error("layernorm d x", x, dx, loss), kTol);
  EXPECT_LT(fd_error("layernorm d weight", w, dw, loss), kTol);
  EXPECT_LT(fd_error("layernorm d bias", b, db, loss), kTol);
}

TEST(TrainOpsGpt2Grad, GeluTanh) {
  const int64_t n = 29;
  auto x = randn(n, 35, 2.5f), r = randn(n, 36);
  std::vector<float> out(n), dx(n, 0.0f);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), n);
    return weighted_sum(out, r);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double want =
        0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(out[i], want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
  gelu_backward(dx.data(), r.data(), x.data(), n);
  EXPECT_LT(fd_error("gelu d x", x, dx, loss), kTol);
}

// The bias enters as matmul_forward's starting value (with a residual `base`), as the model adds
// it.
TEST(TrainOpsGpt2Grad, BiasAndPositions) {
  const int64_t b = 2, t = 5, c = 7, n = b * t, n_ctx = 9, k = 3;
  auto base = randn(n * c, 37), bias = randn(c, 38), table = randn(n_ctx * c, 39);
  auto r = randn(n * c, 40), inp = randn(n * k, 41), w = randn(c * k, 42);
  std::vector<float> out(n * c), dbias(c, 0.0f), dtable(n_ctx * c, 0.0f);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), w.data(), n, k, c, nullptr, false, base.data(),
                   bias.data());
    positions_forward(out.data(), table.data(), n, t, c);
    return weighted_sum(out, r);
  };
  loss();
  // Row 7 is sequence 1, position 2.
  double prod = 0.0;
  for (int64_t j = 0; j < k; ++j) prod += double(inp[7 * k + j]) * w[3 * k + j];
  EXPECT_NEAR(out[7 * c + 3], base[7 * c + 3] + bias[3] + prod + table[2 * c + 3], 1e-5);
  bias_backward(dbias.data(), r.data(), n, c);
  positions_backward(dtable.data(), r.data(), n, t, c);
  EXPECT_LT(fd_error("bias d b", bias, dbias, loss), kTol);
  EXPECT_LT(fd_error("positions d table", table, dtable, loss), kTol);
  for (int64_t j = 0; j < c; ++j) EXPECT_EQ(dtable[t * c + j], 0.0f);  // positions >= t unused
}

}  // namespace
}  // namespace nexus::train
