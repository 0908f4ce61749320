// The trainer against PyTorch (scripts/gen_train_fixtures.py): loss, every parameter gradient and
// a 20-step AdamW loss trajectory of a tiny llama (tied and untied) and gpt2, computed there in
// float64.
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

struct Reference {
  GgufFile file;
  int64_t b = 0, t = 0;
  std::vector<int32_t> tokens, targets;
};

Reference load_reference(const std::string& name) {
  auto f = GgufFile::open(test::fixtures_dir() + "/train/" + name + ".ref.gguf");
  EXPECT_TRUE(f.is_ok()) << (f.is_ok() ? "" : f.status().message());
  Reference r{std::move(f.value()), 0, 0, {}, {}};
  r.b = r.file.get_int("train.batch").value();
  r.t = r.file.get_int("train.seq").value();
  for (int64_t x : *r.file.get_int_array("train.tokens"))
    r.tokens.push_back(static_cast<int32_t>(x));
  for (int64_t x : *r.file.get_int_array("train.targets"))
    r.targets.push_back(static_cast<int32_t>(x));
  return r;
}

class TrainGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainGolden, LossAndAllGradientsMatchPyTorch) {
  const std::string name = GetParam();
  Reference ref = load_reference(name);
  auto m = TrainModel::from_gguf(test::fixtures_dir() + "/train/" + name + ".gguf", ref.b, ref.t);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  TrainModel& model = **m;
  const double want = ref.file.get_float("train.loss").value();
  model.zero_grad();
  const float loss = model.forward(ref.tokens, ref.targets, ref.b, ref.t);
  EXPECT_NEAR(loss, want, 1e-4 * std::abs(want));
  model.backward();
  int checked = 0;
  double worst = 0.0;
  for (const ParamInfo& info : model.tensors()) {
    const GgufTensorInfo* g = ref.file.find_tensor("grad." + info.name);
    ASSERT_NE(g, nullptr) << info.name;
    ASSERT_EQ(g->shape, info.shape) << info.name;
    const float* want_g = reinterpret_cast<const float*>(g->data);
    const float* got_g = model.grad(info.name).data_as<const float>();
    double max_abs = 0.0, max_err = 0.0;
    for (int64_t i = 0; i < info.numel; ++i) {
      max_abs = std::max(max_abs, std::abs(static_cast<double>(want_g[i])));
      max_err = std::max(max_err, std::abs(static_cast<double>(got_g[i]) - want_g[i]));
    }
    ASSERT_GT(max_abs, 0.0) << info.name << ": the reference gradient is all zero";
    EXPECT_LE(max_err, 1e-4 * max_abs)
        << info.name << ": max error " << max_err << " vs max |grad| " << max_abs;
    worst = std::max(worst, max_err / max_abs);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(model.tensors().size()));
  // Threaded attention gives the same gradients bit for bit.
  auto m3 = TrainModel::from_gguf(test::fixtures_dir() + "/train/" + name + ".gguf", ref.b, ref.t);
  ASSERT_TRUE(m3.is_ok());
  m3.value()->set_threads(3);
  EXPECT_EQ(m3.value()->forward(ref.tokens, ref.targets, ref.b, ref.t), loss);
  m3.value()->backward();
  EXPECT_TRUE(std::equal(model.grads().begin(), model.grads().end(), m3.value()->grads().begin()));
  std::printf("[%s] loss %.7f (ref %.7f), worst gradient error %.3g of max |grad|\n", name.c_str(),
              loss, want, worst);
}

TEST_P(TrainGolden, AdamWTrajectoryMatchesPyTorch) {
  const std::string name = GetParam();
  Reference ref = load_reference(name);
  auto m = TrainModel::from_gguf(test::fixtures_dir() + "/train/" + name + ".gguf", ref.b, ref.t);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  TrainModel& model = **m;
  AdamWOptions o;
  o.beta1 = static_cast<float>(ref.file.get_float("train.beta1").value());
  o.beta2 = static_cast<float>(ref.file.get_float("train.beta2").value());
  o.eps = static_cast<float>(ref.file.get_float("train.eps").value());
  o.weight_decay = static_cast<float>(ref.file.get_float("train.weight_decay").value());
  const float lr = static_cast<float>(ref.file.get_float("train.lr").value());
  const float clip = static_cast<float>(ref.file.get_float("train.clip").value());
  AdamW opt(model, o);
  const std::vector<double>& want = *ref.file.get_float_array("train.losses");
  ASSERT_EQ(want.size(), 20u);
  double worst = 0.0;
  for (size_t s = 0; s < want.size(); ++s) {
    model.zero_grad();
    const float loss = model.forward(ref.tokens, ref.targets, ref.b, ref.t);
    model.backward();
    clip_grad_norm(model.grads(), clip);
    opt.step(model.params(), model.grads(), lr);
    EXPECT_NEAR(loss, want[s], 1e-4 * std::abs(want[s])) << "step " << s;
    worst = std::max(worst, std::abs(loss - want[s]) / std::abs(want[s]));
  }
  std::printf("[%s] 20 AdamW steps: loss %.5f -> %.5f, worst relative error %.3g\n", name.c_str(),
              want.front(), want.back(), worst);
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainGolden,
                         ::testing::Values("llama_tied", "llama_untied", "qwen2_untied",
                                           "qwen3_tied", "llama_swa", "gpt2_tied", "mamba_untied",
                                           "mamba2_tied", "granitehybrid_tied"));

}  // namespace
}  // namespace nexus::train
