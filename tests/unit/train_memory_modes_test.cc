// The exact memory savers of training: selective recompute (TrainOptions::selective_recompute)
// gives bit-identical gradients from a smaller arena, and the optimizer step in backward
// (TrainOptions::update_in_backward) gives bit-identical parameters with one block's gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "nexus/core/allocator.h"
#include "test_paths.h"
#include "nexus/train/train_model.h"
#include "trainer_test_util.h"

namespace nexus::train {
namespace {

using test::load_fixture;
using test::make_batch;

using Case = std::tuple<std::string, Precision>;
class SelectiveRecompute : public ::testing::TestWithParam<Case> {};

TEST_P(SelectiveRecompute, GivesBitIdenticalGradientsFromLessMemory) {
  const auto& [name, prec] = GetParam();
  const int64_t b = 3, t = 10;
  auto plain = load_fixture(name, b, t, {.precision = prec});
  auto sel = load_fixture(name, b, t, {.precision = prec, .selective_recompute = true});
  ASSERT_TRUE(plain && sel);
  sel->set_threads(2);
  test::two_passes(*plain, *sel, b, t);
  const size_t n = plain->grads().size();
  size_t nonzero = 0;
  for (float g : plain->grads()) nonzero += g != 0.0f;
  EXPECT_GT(nonzero, n / 2);
  EXPECT_EQ(std::memcmp(plain->grads().data(), sel->grads().data(), n * sizeof(float)), 0);
  const ActivationBytes& p = plain->activation_bytes();
  const ActivationBytes& s = sel->activation_bytes();
  EXPECT_LT(s.total(), p.total());
  EXPECT_EQ(p.block_inputs, s.block_inputs);
  std::printf("[%s %s] activation arena %zu -> %zu bytes with selective recompute\n",
              name.c_str(), precision_name(prec), p.total(), s.total());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SelectiveRecompute,
    ::testing::Combine(::testing::Values("llama_tied", "llama_untied", "qwen2_untied",
                                         "qwen3_tied", "llama_swa", "gpt2_tied"),
                       ::testing::Values(Precision::kF32, Precision::kBF16)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + precision_name(std::get<1>(info.param));
    });

// The same run (fresh model, optimizer and loader from the same seeds) with and without the
// optimizer step in backward.
struct TrainRun {
  std::unique_ptr<TrainModel> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Trainer> trainer;
};

TrainRun make_run(const TokenFile& data, const OptimizerOptions& o, const TrainOptions& topts,
                  int64_t steps = 4) {
  TrainRun r;
  auto m = TrainModel::create(test::tiny_config(), 2, 16, {0.02f, 5, true}, topts);
  EXPECT_TRUE(m.is_ok());
  r.model = std::move(m).value();
  r.model->set_threads(2);
  r.opt = std::move(make_optimizer(*r.model, o)).value();
  r.opt->set_threads(2);
  r.loader = std::make_unique<DataLoader>(data, 2, 16, 9, 0);
  const LrSchedule sched{1e-2f, 1e-3f, 1, steps, LrDecay::kCosine};
  r.trainer = std::make_unique<Trainer>(*r.model, *r.opt, *r.loader,
                                        TrainerOptions{steps, 1, sched, 0.0f, {}});
  return r;
}

class InBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(InBackward, GivesBitIdenticalParametersWithOneBlockOfGradients) {
  const std::string dir = test::temp_dir("in_backward");
  const TokenFile data = test::make_tokens(dir + "/d.bin", 3000);
  OptimizerOptions o;
  o.name = GetParam();
  // Selective recompute keeps the slot in the gradient array; checkpointing puts it in the
  // activation arena, where the head's logits overwrite it before each backward; with row
  // updates (AdamW, SGD) the tied embedding's rows outside the batch are updated after the head
  // and the others at the end, its dense gradient sharing the arena too.
  const bool rows = GetParam() != "adafactor";
  for (const TrainOptions& topts :
       {TrainOptions{.selective_recompute = true, .update_in_backward = true},
        TrainOptions{.recompute_blocks = true, .update_in_backward = true},
        TrainOptions{.recompute_blocks = true, .update_in_backward = true, .row_updates = rows}}) {
    TrainRun ref = make_run(data, o, {});
    TrainRun fused = make_run(data, o, topts);
    const std::string mode = memory_modes(topts);
    for (int i = 0; i < 4; ++i) {
      const StepStats a = ref.trainer->step(), b = fused.trainer->step();
      EXPECT_EQ(a.loss, b.loss) << mode << ", step " << i;
      EXPECT_EQ(a.lr, b.lr);
      // The same squares summed in double, in another grouping.
      EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-6 * a.grad_norm);
    }
    EXPECT_EQ(ref.opt->steps(), fused.opt->steps());
    const size_t n = ref.model->params().size();
    EXPECT_EQ(std::memcmp(ref.model->params().data(), fused.model->params().data(),
                          n * sizeof(float)),
              0)
        << mode;
    for (const StateBuffer& s : ref.opt->state()) {
      bool same = false;
      for (const StateBuffer& f : fused.opt->state())
        if (f.name == s.name)
          same = std::memcmp(f.data.data(), s.data.data(), s.data.size() * sizeof(float)) == 0;
      EXPECT_TRUE(same) << mode << ": " << s.name;
    }
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, InBackward, ::testing::Values("adamw", "sgd", "adafactor"));

// AdamW with bf16 moments (stochastic rounding) follows the f32-state run closely: 60 steps of
// the tiny model, losses compared step by step.
TEST(Bf16State, TrainsLikeF32State) {
  const std::string dir = test::temp_dir("bf16_state");
  const TokenFile data = test::make_tokens(dir + "/d.bin", 6000);
  OptimizerOptions o;
  TrainRun f32 = make_run(data, o, {}, 60);
  o.adamw.bf16_state = true;
  TrainRun bf16 = make_run(data, o, {.update_in_backward = true}, 60);
  EXPECT_EQ(bf16.opt->state_bytes() * 2, f32.opt->state_bytes());
  double worst = 0;
  float first = 0, last_f32 = 0, last_bf16 = 0;
  for (int i = 0; i < 60; ++i) {
    const float a = f32.trainer->step().loss, b = bf16.trainer->step().loss;
    if (i == 0) first = a;
    last_f32 = a, last_bf16 = b;
    worst = std::max(worst, std::abs(static_cast<double>(a) - b) / a);
  }
  std::printf("bf16 AdamW state: loss %.4f -> %.4f (f32 state %.4f), worst step difference %.2e\n",
              first, last_bf16, last_f32, worst);
  EXPECT_LT(last_f32, 0.85f * first);  // it learns
  EXPECT_LT(worst, 1e-2);
  EXPECT_GT(worst, 0.0);  // the rounding is real
  std::filesystem::remove_all(dir);
}

TEST(InBackward, KeepsOneBlockOfGradients) {
  const ModelConfig c = test::tiny_config();
  const uint64_t before = mem_stats().current[static_cast<int>(MemCategory::kOptimizer)];
  auto plain = TrainModel::create(c, 2, 16);
  const uint64_t plain_bytes =
      mem_stats().current[static_cast<int>(MemCategory::kOptimizer)] - before;
  auto fused = TrainModel::create(c, 2, 16, {}, {.update_in_backward = true});
  const uint64_t fused_bytes =
      mem_stats().current[static_cast<int>(MemCategory::kOptimizer)] - before - plain_bytes;
  ASSERT_TRUE(plain.is_ok() && fused.is_ok());
  // Two blocks: one block's gradients fewer.
  const TrainModel& m = *plain.value();
  int64_t block = 0;
  for (const ParamInfo& info : m.tensors())
    if (info.name.starts_with("blk.0.")) block += info.numel;
  EXPECT_EQ(plain_bytes, m.params().size() * sizeof(float));
  EXPECT_EQ(fused_bytes, plain_bytes - block * sizeof(float));
  // Block gradients are not kept; the others are.
  EXPECT_THROW(fused.value()->grads(), Error);
  EXPECT_THROW(fused.value()->grad("blk.1.attn_q.weight"), Error);
  EXPECT_EQ(fused.value()->grad("token_embd.weight").numel(), c.n_vocab * c.dim);
  // Without a trainer's callback, backward() refuses.
  std::vector<int32_t> tokens, targets;
  make_batch(c.n_vocab, 2, 16, &tokens, &targets);
  fused.value()->forward(tokens, targets, 2, 16);
  EXPECT_THROW(fused.value()->backward(), Error);
}

TEST(InBackward, RefusesWhatNeedsEveryGradientFirst) {
  const std::string dir = test::temp_dir("in_backward_refuses");
  const TokenFile data = test::make_tokens(dir + "/d.bin", 3000);
  auto m = TrainModel::create(test::tiny_config(), 2, 16, {}, {.update_in_backward = true});
  ASSERT_TRUE(m.is_ok());
  DataLoader loader(data, 2, 16, 9, 0);
  AdamW adamw(*m.value(), {});
  const LrSchedule sched{};
  auto message = [&](Optimizer& opt, const TrainerOptions& o) {
    try {
      Trainer t(*m.value(), opt, loader, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(adamw, {4, 2, sched, 0.0f, {}}).find("gradient accumulation"),
            std::string::npos);
  EXPECT_NE(message(adamw, {4, 1, sched, 1.0f, {}}).find("gradient clipping"), std::string::npos);
  EXPECT_NE(message(adamw, {4, 1, sched, 0.0f, LossScaleOptions{}}).find("loss scaling"),
            std::string::npos);
  EXPECT_EQ(message(adamw, {4, 1, sched, 0.0f, {}}), "");
  std::filesystem::remove_all(dir);
}

TEST(OptimizerRanges, RangesMustBeWholeTensors) {
  auto m = TrainModel::create(test::tiny_config(), 1, 4);
  ASSERT_TRUE(m.is_ok());
  std::vector<float> g(m.value()->params().size(), 0.5f);
  const ParamInfo& second = m.value()->tensors()[1];
  for (const char* name : {"adamw", "sgd", "adafactor"}) {
    OptimizerOptions o;
    o.name = name;
    auto opt = make_optimizer(*m.value(), o);
    ASSERT_TRUE(opt.is_ok());
    Optimizer& op = *opt.value();
    EXPECT_NO_THROW(op.step_range(m.value()->params(), g.data(), second.offset,
                                  second.offset + second.numel, 1e-3f))
        << name;
    EXPECT_THROW(op.step_range(m.value()->params(), g.data(), second.offset + 1,
                               second.offset + second.numel, 1e-3f),
                 Error)
        << name;
    EXPECT_THROW(op.step_range(m.value()->params(), g.data(), 0, 3, 1e-3f), Error) << name;
  }
}

}  // namespace
}  // namespace nexus::train

namespace nexus::train {
namespace {

// The progress lines of train and find-batch-size name the modes through one function.
TEST(MemoryModes, NamesTheModesThatAreOn) {
  TrainOptions o;
  EXPECT_EQ(memory_modes(o), "");
  o.selective_recompute = true;
  EXPECT_EQ(memory_modes(o), "selective recompute");
  o.update_in_backward = true;
  EXPECT_EQ(memory_modes(o), "selective recompute, optimizer in backward");
  o.recompute_blocks = true;  // supersedes selective recompute
  EXPECT_EQ(memory_modes(o), "gradient checkpointing, optimizer in backward");
}

}  // namespace
}  // namespace nexus::train
