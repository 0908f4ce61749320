// Trainer: gradient accumulation equals one big batch, and a run resumed from a checkpoint is
// bit-identical to an uninterrupted one.
#include "nexus/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "nexus/train/checkpoint.h"
#include "trainer_test_util.h"

namespace nexus::train {
namespace {

using test::kVocab;
using test::make_tokens;
using test::run_steps;
using test::temp_dir;
using test::tiny_config;

TEST(Trainer, OptionsThatMakeNoRunAreRejected) {
  const LrSchedule sched{1e-3f, 0, 0, 10, LrDecay::kCosine};
  const TrainerOptions good{10, 1, sched, 1.0f, {}};
  EXPECT_TRUE(validate(good).is_ok());
  TrainerOptions zero_lr = good;  // lr 0 and clip 0 (off) are allowed, as in torch.optim
  zero_lr.schedule.lr = 0.0f;
  zero_lr.clip = 0.0f;
  EXPECT_TRUE(validate(zero_lr).is_ok());
  const float nan = std::nanf(""), inf = INFINITY;
  const struct {
    void (*set)(TrainerOptions&, float);
    float value;
    const char* message;
  } cases[] = {
      {[](TrainerOptions& o, float v) { o.schedule.lr = v; }, -1e-3f, "learning rate must be"},
      {[](TrainerOptions& o, float v) { o.schedule.lr = v; }, nan, "learning rate must be"},
      {[](TrainerOptions& o, float v) { o.schedule.lr = v; }, inf, "learning rate must be"},
      {[](TrainerOptions& o, float v) { o.schedule.min_lr = v; }, -1e-5f,
       "final learning rate must be"},
      {[](TrainerOptions& o, float v) { o.schedule.warmup = static_cast<int64_t>(v); }, -3.0f,
       "warmup steps must be >= 0"},
      {[](TrainerOptions& o, float v) { o.clip = v; }, -1.0f, "gradient-norm limit must be"},
      {[](TrainerOptions& o, float v) { o.clip = v; }, nan, "gradient-norm limit must be"},
      {[](TrainerOptions& o, float v) { o.steps = static_cast<int64_t>(v); }, 0.0f,
       "accum and steps must be >= 1"},
      {[](TrainerOptions& o, float v) { o.accum = static_cast<int64_t>(v); }, 0.0f,
       "accum and steps must be >= 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    TrainerOptions o = good;
    c.set(o, c.value);
    const Status st = validate(o);
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
  }
  // The trainer itself refuses them too (for callers of the library).
  const std::string dir = temp_dir("reject");
  const TokenFile data = make_tokens(dir + "/d.bin", 500);
  auto model = TrainModel::create(tiny_config(), 2, 16, {0.02f, 3, true});
  ASSERT_TRUE(model.is_ok());
  AdamW opt(*model.value(), {});
  DataLoader loader(data, 2, 16, 11, 0);
  TrainerOptions bad = good;
  bad.schedule.lr = nan;
  EXPECT_THROW(Trainer(*model.value(), opt, loader, bad), std::exception);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, AccumulationMatchesOneBigBatch) {
  const std::string dir = temp_dir("accum");
  const TokenFile data = make_tokens(dir + "/d.bin", 2000);
  const int64_t seq = 16;
  auto big = TrainModel::create(tiny_config(), 4, seq, {0.02f, 3, true});
  auto small = TrainModel::create(tiny_config(), 2, seq, {0.02f, 3, true});
  ASSERT_TRUE(big.is_ok() && small.is_ok());
  AdamW opt_big(*big.value(), {}), opt_small(*small.value(), {});
  // Batch k of a loader is the seed's window stream cut `batch` at a time, so micro-batches 0
  // and 1 of the batch-2 loader hold exactly the 4 windows of batch 0 of the batch-4 loader.
  DataLoader l_big(data, 4, seq, 11, 0), l_small(data, 2, seq, 11, 0);
  LrSchedule sched{1e-3f, 0, 0, 10, LrDecay::kConstant};
  Trainer t_big(*big.value(), opt_big, l_big, {10, 1, sched, 1.0f, {}});
  Trainer t_small(*small.value(), opt_small, l_small, {10, 2, sched, 1.0f, {}});
  const float loss_big = t_big.accumulate(), loss_small = t_small.accumulate();
  // Losses: a mean over 64 tokens against the mean of two means over 32 (double sums, rounded
  // to float once each): a few ulps.
  EXPECT_NEAR(loss_big, loss_small, 4e-7 * loss_big);
  // Every row's forward and backward is the same computation in both; only the weight gradients
  // (dW = sum over the 64 rows of dy x^T) and the embedding scatter sum rows in another order.
  // The error of a float sum of n = 64 terms is at most (n - 1) u sum|terms| (u = 6e-8), i.e.
  // 3.8e-6 sum|terms|; with sum|terms| up to a few times |sum| we bound 2e-5 of the tensor's
  // max-abs gradient. The scales 1/64 vs 1/32 * 1/2 are powers of two, hence exact.
  double worst = 0;
  for (const ParamInfo& info : big.value()->tensors()) {
    const float* a = big.value()->grads().data() + info.offset;
    const float* b = small.value()->grads().data() + info.offset;
    double max_abs = 0, max_diff = 0;
    for (int64_t i = 0; i < info.numel; ++i) {
      max_abs = std::max(max_abs, std::abs(static_cast<double>(a[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    }
    ASSERT_GT(max_abs, 0) << info.name;
    EXPECT_LE(max_diff, 2e-5 * max_abs) << info.name;
    worst = std::max(worst, max_diff / max_abs);
  }
  std::printf("accumulation: worst gradient difference %.2e of the tensor's max-abs\n", worst);
  // The whole step through the trainer (fresh streams), then the parameters: AdamW's first update
  // is lr * g / (|g| + eps), so a gradient difference d moves a parameter by at most lr * d / eps
  // where |g| is tiny and far less elsewhere; 1e-6 (lr 1e-3) leaves that room.
  DataLoader l_big2(data, 4, seq, 11, 0), l_small2(data, 2, seq, 11, 0);
  Trainer s_big(*big.value(), opt_big, l_big2, {10, 1, sched, 1.0f, {}});
  Trainer s_small(*small.value(), opt_small, l_small2, {10, 2, sched, 1.0f, {}});
  const StepStats a = s_big.step(), b = s_small.step();
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm);
  double max_dp = 0;
  for (size_t i = 0; i < big.value()->params().size(); ++i)
    max_dp = std::max(max_dp, std::abs(static_cast<double>(big.value()->params()[i]) -
                                       small.value()->params()[i]));
  EXPECT_LE(max_dp, 1e-6);
  std::printf("accumulation: max parameter difference after one step %.2e\n", max_dp);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, ResumeFromCheckpointIsBitExact) {
  const std::string dir = temp_dir("resume");
  const TokenFile data = make_tokens(dir + "/d.bin", 3000);
  TrainSettings s;
  s.model = tiny_config();
  s.batch = 2, s.seq = 16, s.accum = 2, s.steps = 10, s.seed = 5;
  s.schedule = {3e-3f, 1e-4f, 3, 10, LrDecay::kCosine};
  // Straight: 10 steps.
  auto m1 = TrainModel::create(s.model, s.batch, s.seq, {0.02f, 9, true});
  ASSERT_TRUE(m1.is_ok());
  auto o1 = make_optimizer(*m1.value(), s.optimizer);
  ASSERT_TRUE(o1.is_ok());
  DataLoader l1(data, 2, 16, s.seed, 2);
  Trainer t1(*m1.value(), *o1.value(), l1, {s.steps, s.accum, s.schedule, s.clip, {}});
  const std::vector<float> straight = run_steps(t1, 10);

  // Interrupted: 5 steps, checkpoint, everything destroyed, rebuilt from the file, 5 more.
  const std::string ckpt = checkpoint_path(dir, 5);
  std::vector<float> resumed;
  {
    auto m = TrainModel::create(s.model, s.batch, s.seq, {0.02f, 9, true});
    auto o = make_optimizer(*m.value(), s.optimizer);
    DataLoader l(data, 2, 16, s.seed, 2);
    Trainer t(*m.value(), *o.value(), l, {s.steps, s.accum, s.schedule, s.clip, {}});
    resumed = run_steps(t, 5);
    ASSERT_TRUE(save_checkpoint(ckpt, s, {t.step_index(), t.tokens(), l.state()}, *m.value(),
                                *o.value(), nullptr)
                    .is_ok());
  }
  auto c = Checkpoint::open(ckpt);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c.value().progress().step, 5);
  EXPECT_EQ(c.value().optimizer_steps(), 5);
  const TrainSettings& cs = c.value().settings();
  EXPECT_EQ(cs.schedule.lr, s.schedule.lr);
  EXPECT_EQ(cs.accum, 2);
  auto m2 = TrainModel::create(cs.model, cs.batch, cs.seq, {0.02f, 1, true});  // other init
  ASSERT_TRUE(m2.is_ok());
  ASSERT_TRUE(c.value().restore_model(*m2.value()).is_ok());
  auto o2 = make_optimizer(*m2.value(), cs.optimizer);
  ASSERT_TRUE(c.value().restore_optimizer(*o2.value()).is_ok());
  DataLoader l2(data, 2, 16, /*seed=*/999, 2);
  l2.restore(c.value().progress().loader);
  Trainer t2(*m2.value(), *o2.value(), l2, {cs.steps, cs.accum, cs.schedule, cs.clip, {}});
  t2.set_progress(c.value().progress().step, c.value().progress().tokens);
  const std::vector<float> rest = run_steps(t2, 5);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(std::memcmp(&straight[i], &resumed[i], sizeof(float)), 0)
        << "step " << i + 1 << ": " << straight[i] << " vs " << resumed[i];
  EXPECT_EQ(std::memcmp(m1.value()->params().data(), m2.value()->params().data(),
                        m1.value()->params().size_bytes()),
            0);
  EXPECT_TRUE(t2.done());
  EXPECT_EQ(t2.tokens(), t1.tokens());
  std::filesystem::remove_all(dir);
}

TEST(Trainer, ValidationLossIsTheTokenWeightedMean) {
  const std::string dir = temp_dir("eval");
  const TokenFile data = make_tokens(dir + "/d.bin", 16 * 5 + 1);  // 5 windows: batches 2, 2, 1
  auto m = TrainModel::create(tiny_config(), 2, 16, {0.02f, 3, true});
  AdamW opt(*m.value(), {});
  DataLoader l(data, 2, 16, 1, 0);
  Trainer t(*m.value(), opt, l, {1, 1, {}, 1.0f, {}});
  SequentialBatches val(data, 2, 16);
  // Reference: each window alone (batch 1), averaged.
  double sum = 0;
  for (int w = 0; w < 5; ++w) {
    std::vector<int32_t> x(16), y(16);
    data.copy(static_cast<uint64_t>(w) * 16, x);
    data.copy(static_cast<uint64_t>(w) * 16 + 1, y);
    sum += m.value()->forward(x, y, 1, 16);
  }
  EXPECT_NEAR(t.evaluate(val, 0), sum / 5, 1e-6);
  SequentialBatches val2(data, 2, 16);
  double first2 = 0;
  for (int w = 0; w < 2; ++w) {
    std::vector<int32_t> x(16), y(16);
    data.copy(static_cast<uint64_t>(w) * 16, x);
    data.copy(static_cast<uint64_t>(w) * 16 + 1, y);
    first2 += m.value()->forward(x, y, 1, 16);
  }
  EXPECT_NEAR(t.evaluate(val2, 1), first2 / 2, 1e-6);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus::train

namespace nexus::train::test {
namespace {

// keep_zeros: parameters that start at zero are zero after every update, whether the optimizer
// steps after backward (the whole array) or in backward (a block's range at a time), and the
// others train.
TEST(Trainer, KeepZerosHoldsTheZerosInBothUpdatePaths) {
  const std::string dir = temp_dir("keep_zeros");
  const TokenFile data = make_tokens(dir + "/d.bin", 2000);
  for (bool in_backward : {false, true}) {
    TrainOptions o;
    o.update_in_backward = in_backward;
    auto m = TrainModel::create(tiny_config(), 2, 16, {0.02f, 3, true}, o);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    // Every other parameter zeroed, so every tensor edge holds one.
    std::span<float> p = m.value()->params();
    for (size_t i = 0; i < p.size(); i += 2) p[i] = 0.0f;
    const std::vector<float> before(p.begin(), p.end());
    AdamW opt(*m.value(), {});
    DataLoader loader(data, 2, 16, 5, 0);
    TrainerOptions to{3, 1, {1e-2f, 0, 0, 3, LrDecay::kConstant}, in_backward ? 0.0f : 1.0f, {}};
    to.keep_zeros = true;
    Trainer t(*m.value(), opt, loader, to);
    for (int s = 0; s < 3; ++s) t.step();
    size_t moved = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (i % 2 == 0) {
        ASSERT_EQ(p[i], 0.0f) << "parameter " << i << " in_backward " << in_backward;
      }
      moved += p[i] != before[i];
    }
    EXPECT_GT(moved, p.size() / 3) << "in_backward " << in_backward;
  }
}

}  // namespace
}  // namespace nexus::train::test
