// Mixed-precision training passes (TrainOptions::precision): losses and gradients close to f32,
// bit-identical with and without gradient checkpointing, smaller activation memory, and fp16's
// need for loss scaling shown on gradients that underflow without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "test_paths.h"
#include "nexus/train/train_model.h"
#include "trainer_test_util.h"

namespace nexus::train {
namespace {

using test::load_fixture;
using test::make_batch;

// ||a - b|| / ||b|| over all gradients.
double rel_error(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  std::string model;
  Precision precision;
};

class TrainPrecision : public ::testing::TestWithParam<Case> {};

TEST_P(TrainPrecision, LossAndGradientsCloseToF32) {
  const auto& [name, prec] = GetParam();
  const int64_t b = 3, t = 10;
  auto ref = load_fixture(name, b, t, {});
  auto half = load_fixture(name, b, t, {.precision = prec});
  ASSERT_TRUE(ref && half);
  std::vector<int32_t> tokens, targets;
  make_batch(ref->config().n_vocab, b, t, &tokens, &targets);
  const float l0 = ref->forward(tokens, targets, b, t);
  const float l1 = half->forward(tokens, targets, b, t);
  ref->backward();
  half->backward();
  const double err = rel_error(half->grads(), ref->grads());
  std::printf("[%s %s] loss %.6f vs f32 %.6f, gradient relative error %.3g\n", name.c_str(),
              precision_name(prec), l1, l0, err);
  // bf16 keeps 8 significant bits (relative rounding 2^-9), fp16 11 (2^-12).
  const double tol = prec == Precision::kBF16 ? 3e-2 : 3e-3;
  EXPECT_NEAR(l1, l0, tol * std::abs(l0));
  EXPECT_LT(err, tol);
  EXPECT_GT(err, 0.0);  // the rounding is real
}

TEST_P(TrainPrecision, RecomputeGivesBitIdenticalGradients) {
  const auto& [name, prec] = GetParam();
  const int64_t b = 3, t = 10;
  auto packed = load_fixture(name, b, t, {.precision = prec});
  auto recomputed = load_fixture(name, b, t, {.recompute_blocks = true, .precision = prec});
  ASSERT_TRUE(packed && recomputed);
  packed->set_threads(2);
  test::two_passes(*packed, *recomputed, b, t);
  const size_t n = packed->grads().size();
  EXPECT_EQ(std::memcmp(packed->grads().data(), recomputed->grads().data(), n * sizeof(float)), 0);
}

TEST_P(TrainPrecision, SavedActivationsTakeLessMemory) {
  const auto& [name, prec] = GetParam();
  auto ref = load_fixture(name, 4, 16, {});
  auto half = load_fixture(name, 4, 16, {.precision = prec});
  ASSERT_TRUE(ref && half);
  const ActivationBytes& r = ref->activation_bytes();
  const ActivationBytes& h = half->activation_bytes();
  std::printf("[%s %s] activations %zu bytes vs f32 %zu (blocks %zu + 16-bit %zu vs %zu); "
              "weight copies %zu bytes\n",
              name.c_str(), precision_name(prec), h.total(), r.total(), h.blocks, h.half,
              r.blocks, half->weight_copy_bytes());
  EXPECT_EQ(r.half, 0u);
  EXPECT_GT(h.half, 0u);
  EXPECT_LT(h.blocks + h.half, r.blocks);
  EXPECT_EQ(h.head, r.head);
  EXPECT_EQ(ref->weight_copy_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainPrecision,
    ::testing::Values(Case{"llama_tied", Precision::kBF16}, Case{"llama_untied", Precision::kF16},
                      Case{"qwen2_untied", Precision::kBF16}, Case{"qwen3_tied", Precision::kBF16},
                      Case{"qwen3_tied", Precision::kF16}, Case{"llama_swa", Precision::kBF16},
                      Case{"gpt2_tied", Precision::kBF16}, Case{"gpt2_tied", Precision::kF16}),
    [](const auto& info) {
      return info.param.model + "_" + std::string(precision_name(info.param.precision));
    });

// fp16's smallest normal is 2^-14 and its smallest subnormal 2^-24: with a 4096-token vocabulary
// and 256 rows the loss gradients (softmax / rows ~ 1e-6) are subnormals, and the attention
// gradients of a freshly initialised model (near-uniform attention) are smaller still, so most
// of their bits are lost; multiplying the loss by 65536 lifts them into the normal range, and
// dividing afterwards restores them.
TEST(TrainPrecision, F16NeedsLossScaling) {
  ModelConfig c = test::tiny_config();
  c.n_vocab = 4096;
  c.n_ctx_train = 64;
  c.tied_output = false;
  const int64_t b = 4, t = 64;
  auto create = [&](Precision p) {
    auto m = TrainModel::create(c, b, t, {}, {.precision = p});
    EXPECT_TRUE(m.is_ok());
    return std::move(m).value();
  };
  auto ref = create(Precision::kF32);
  auto f16 = create(Precision::kF16);
  std::vector<int32_t> tokens, targets;
  make_batch(c.n_vocab, b, t, &tokens, &targets);
  ref->forward(tokens, targets, b, t);
  ref->backward();
  auto error_with_scale = [&](float scale) {
    f16->zero_grad();
    f16->set_loss_scale(scale);
    f16->forward(tokens, targets, b, t);
    f16->backward();
    std::vector<float> g(f16->grads().begin(), f16->grads().end());
    for (float& x : g) x /= scale;
    double worst = 0;  // per tensor: the small attention gradients are the ones that underflow
    for (const ParamInfo& pi : f16->tensors())
      worst = std::max(worst, rel_error(std::span<const float>(g).subspan(pi.offset, pi.numel),
                                        ref->grads().subspan(pi.offset, pi.numel)));
    return worst;
  };
  const double unscaled = error_with_scale(1.0f);
  const double scaled = error_with_scale(65536.0f);
  std::printf("fp16 gradients, worst tensor's relative error: %.3g without loss scaling, %.3g "
              "with 65536\n", unscaled, scaled);
  EXPECT_LT(scaled, 3e-3);
  EXPECT_GT(unscaled, 5 * scaled);
}

}  // namespace
}  // namespace nexus::train
