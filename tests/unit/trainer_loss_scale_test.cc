// Mixed precision through the Trainer: dynamic loss scaling skips the steps whose fp16 gradients
// overflow (parameters untouched), halves the scale on each and doubles it after the growth
// interval; an fp16 run with loss scaling resumes from a checkpoint bit-exactly; bf16 trains.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "nexus/train/checkpoint.h"
#include "trainer_test_util.h"

namespace nexus::train {
namespace {

using test::make_tokens;
using test::run_steps;
using test::temp_dir;
using test::tiny_config;

TEST(TrainerLossScale, SkipsOverflowsHalvesAndGrows) {
  const std::string dir = temp_dir("loss_scale");
  const TokenFile data = make_tokens(dir + "/d.bin", 3000);
  auto m = TrainModel::create(tiny_config(), 2, 16, {0.02f, 3, true}, {.precision = Precision::kF16});
  ASSERT_TRUE(m.is_ok());
  TrainModel& model = *m.value();
  AdamW opt(model, {});
  DataLoader loader(data, 2, 16, 4, 0);
  // 2^40 overflows fp16 (largest finite 65504) in the loss gradients themselves; the scaler must
  // back off to a working scale, then grow again every 3 finite steps until it overflows again.
  LossScaleOptions ls{.init = std::ldexp(1.0f, 40), .growth_interval = 3};
  Trainer t(model, opt, loader, {40, 1, {1e-3f, 0, 0, 40, LrDecay::kConstant}, 1.0f, ls});
  float expect_scale = ls.init;
  int64_t good = 0, skipped = 0, grown = 0;
  for (int i = 0; i < 40; ++i) {
    const std::vector<float> before(model.params().begin(), model.params().end());
    const StepStats st = t.step();
    ASSERT_EQ(st.loss_scale, expect_scale) << "step " << st.step;
    ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
    const bool unchanged =
        std::memcmp(before.data(), model.params().data(), before.size() * sizeof(float)) == 0;
    EXPECT_EQ(unchanged, st.skipped) << "step " << st.step;
    EXPECT_EQ(st.skipped, !std::isfinite(st.grad_norm)) << "step " << st.step;
    if (st.skipped) {
      expect_scale *= 0.5f, good = 0, ++skipped;
    } else if (++good == 3) {
      expect_scale *= 2.0f, good = 0, ++grown;
    }
  }
  std::printf("loss scaling: %lld skipped steps, %lld growths, final scale %g\n",
              static_cast<long long>(skipped), static_cast<long long>(grown), expect_scale);
  EXPECT_GE(skipped, 10);  // 2^40 down to below 2^16 at least
  EXPECT_GE(grown, 1);
  EXPECT_EQ(t.loss_scaler()->skipped_steps(), skipped);
  EXPECT_EQ(t.loss_scaler()->scale(), expect_scale);
  std::filesystem::remove_all(dir);
}

TEST(TrainerLossScale, F16ResumeIsBitExact) {
  const std::string dir = temp_dir("f16_resume");
  const TokenFile data = make_tokens(dir + "/d.bin", 3000);
  TrainSettings s;
  s.model = tiny_config();
  s.batch = 2, s.seq = 16, s.steps = 10, s.seed = 5;
  s.schedule = {3e-3f, 1e-4f, 3, 10, LrDecay::kCosine};
  s.precision = Precision::kF16;
  s.loss_scale = LossScaleOptions{.init = std::ldexp(1.0f, 24), .growth_interval = 2};
  const TrainOptions to{.precision = s.precision};
  const TrainerOptions topts{s.steps, s.accum, s.schedule, s.clip, s.loss_scale};
  auto m1 = TrainModel::create(s.model, s.batch, s.seq, {0.02f, 9, true}, to);
  auto o1 = make_optimizer(*m1.value(), s.optimizer);
  DataLoader l1(data, 2, 16, s.seed, 2);
  Trainer t1(*m1.value(), *o1.value(), l1, topts);
  const std::vector<float> straight = run_steps(t1, 10);

  const std::string ckpt = checkpoint_path(dir, 5);
  std::vector<float> resumed;
  {
    auto m = TrainModel::create(s.model, s.batch, s.seq, {0.02f, 9, true}, to);
    auto o = make_optimizer(*m.value(), s.optimizer);
    DataLoader l(data, 2, 16, s.seed, 2);
    Trainer t(*m.value(), *o.value(), l, topts);
    resumed = run_steps(t, 5);
    const LossScaler& ls = *t.loss_scaler();
    TrainProgress p{t.step_index(), t.tokens(), l.state(), ls.scale(), ls.good_steps(),
                    ls.skipped_steps()};
    ASSERT_TRUE(save_checkpoint(ckpt, s, p, *m.value(), *o.value(), nullptr).is_ok());
  }
  auto c = Checkpoint::open(ckpt);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const TrainSettings& cs = c.value().settings();
  const TrainProgress& cp = c.value().progress();
  EXPECT_EQ(cs.precision, Precision::kF16);
  ASSERT_TRUE(cs.loss_scale.has_value());
  EXPECT_EQ(cs.loss_scale->growth_interval, 2);
  auto m2 = TrainModel::create(cs.model, cs.batch, cs.seq, {0.02f, 1, true},
                               {.precision = cs.precision});
  ASSERT_TRUE(c.value().restore_model(*m2.value()).is_ok());
  auto o2 = make_optimizer(*m2.value(), cs.optimizer);
  ASSERT_TRUE(c.value().restore_optimizer(*o2.value()).is_ok());
  DataLoader l2(data, 2, 16, 999, 2);
  l2.restore(cp.loader);
  Trainer t2(*m2.value(), *o2.value(), l2, {cs.steps, cs.accum, cs.schedule, cs.clip, cs.loss_scale});
  t2.set_progress(cp.step, cp.tokens);
  t2.loss_scaler()->restore(cp.loss_scale, cp.loss_scale_good, cp.skipped_steps);
  const std::vector<float> rest = run_steps(t2, 5);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(std::memcmp(&straight[i], &resumed[i], sizeof(float)), 0) << "step " << i + 1;
  EXPECT_EQ(std::memcmp(m1.value()->params().data(), m2.value()->params().data(),
                        m1.value()->params().size_bytes()),
            0);
  EXPECT_EQ(t2.loss_scaler()->scale(), t1.loss_scaler()->scale());
  EXPECT_EQ(t2.loss_scaler()->skipped_steps(), t1.loss_scaler()->skipped_steps());
  std::filesystem::remove_all(dir);
}

// bf16 and fp16 runs learn like the f32 one: after 30 steps on the same stream their losses are
// within a few percent of it (and well below the start).
TEST(TrainerLossScale, HalfPrecisionRunsTrackF32) {
  const std::string dir = temp_dir("half_tracks");
  const TokenFile data = make_tokens(dir + "/d.bin", 6000);
  auto final_loss = [&](Precision p, float* first) {
    auto m = TrainModel::create(tiny_config(), 4, 16, {0.02f, 3, true}, {.precision = p});
    AdamW opt(*m.value(), {});
    DataLoader l(data, 4, 16, 8, 0);
    std::optional<LossScaleOptions> ls;
    if (p == Precision::kF16) ls = LossScaleOptions{};
    Trainer t(*m.value(), opt, l, {30, 1, {3e-3f, 0, 0, 30, LrDecay::kConstant}, 1.0f, ls});
    const std::vector<float> losses = run_steps(t, 30);
    *first = losses.front();
    double tail = 0;
    for (int i = 25; i < 30; ++i) tail += losses[i];
    return tail / 5;
  };
  float f0, b0, h0;
  const double f32 = final_loss(Precision::kF32, &f0);
  const double bf16 = final_loss(Precision::kBF16, &b0);
  const double f16 = final_loss(Precision::kF16, &h0);
  std::printf("mean loss of steps 26-30: f32 %.4f, bf16 %.4f, f16 %.4f (start %.4f)\n", f32, bf16,
              f16, f0);
  EXPECT_LT(f32, 0.9 * f0);
  EXPECT_NEAR(bf16, f32, 0.03 * f32);
  EXPECT_NEAR(f16, f32, 0.01 * f32);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus::train
