// SGD (torch.optim.SGD) and Adafactor (an independent float64 reference of the paper's formulas)
// against scripts/gen_train_fixtures.py: the losses of 20 steps of the tiny llama fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nexus/io/gguf.h"
#include "test_paths.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/train_model.h"

namespace nexus::train {
namespace {

struct Case {
  std::string model;
  std::string optimizer;
};

class OptimizerGolden : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerGolden, TwentyStepLossesMatchReference) {
  const Case c = GetParam();
  const std::string dir = test::fixtures_dir() + "/train/" + c.model;
  auto ref = GgufFile::open(dir + ".ref.gguf");
  auto opt_ref = GgufFile::open(dir + ".opt.gguf");
  ASSERT_TRUE(ref.is_ok() && opt_ref.is_ok());
  const int64_t b = ref->get_int("train.batch").value(), t = ref->get_int("train.seq").value();
  std::vector<int32_t> tokens, targets;
  for (int64_t x : *ref->get_int_array("train.tokens")) tokens.push_back(static_cast<int32_t>(x));
  for (int64_t x : *ref->get_int_array("train.targets")) targets.push_back(static_cast<int32_t>(x));
  ASSERT_EQ(*opt_ref->get_int_array("train.tokens"), *ref->get_int_array("train.tokens"));

  auto m = TrainModel::from_gguf(dir + ".gguf", b, t);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  TrainModel& model = **m;
  auto f = [&](const std::string& k) {
    return static_cast<float>(opt_ref->get_float("opt." + c.optimizer + "." + k).value());
  };
  OptimizerOptions o;
  o.name = c.optimizer;
  if (c.optimizer == "sgd") {
    o.momentum = f("momentum");
    o.nesterov = opt_ref->get_int("opt.sgd.nesterov").value() != 0;
    o.sgd_weight_decay = f("weight_decay");
  } else {
    o.adafactor_decay = f("decay");
    o.adafactor_eps1 = f("eps1");
    o.adafactor_clip = f("clip_threshold");
    o.adafactor_weight_decay = f("weight_decay");
  }
  const float lr = f("lr");
  const float clip = static_cast<float>(opt_ref->get_float("opt.clip").value());
  auto opt = make_optimizer(model, o);
  ASSERT_TRUE(opt.is_ok()) << opt.status().message();
  const std::vector<double>& want = *opt_ref->get_float_array("opt." + c.optimizer + ".losses");
  ASSERT_EQ(want.size(), 20u);
  ASSERT_LT(want.back(), 0.5 * want.front());  // the trajectory moves: the test can fail
  double worst = 0.0;
  for (size_t s = 0; s < want.size(); ++s) {
    model.zero_grad();
    const float loss = model.forward(tokens, targets, b, t);
    model.backward();
    clip_grad_norm(model.grads(), clip);
    (*opt)->step(model.params(), model.grads(), lr);
    EXPECT_NEAR(loss, want[s], 1e-4 * std::abs(want[s])) << "step " << s;
    worst = std::max(worst, std::abs(loss - want[s]) / std::abs(want[s]));
  }
  EXPECT_EQ((*opt)->steps(), 20);
  std::printf("[%s] 20 %s steps: loss %.5f -> %.5f, worst relative error %.3g\n", c.model.c_str(),
              c.optimizer.c_str(), want.front(), want.back(), worst);
}

INSTANTIATE_TEST_SUITE_P(Cases, OptimizerGolden,
                         ::testing::Values(Case{"llama_tied", "sgd"}, Case{"llama_untied", "sgd"},
                                           Case{"llama_tied", "adafactor"},
                                           Case{"llama_untied", "adafactor"}),
                         [](const auto& info) {
                           return info.param.model + "_" + info.param.optimizer;
                         });

}  // namespace
}  // namespace nexus::train
