// Training memory: the breakdown matches the allocations (and a training step allocates nothing
// beyond it), the batch search finds the exact boundary, and the size / shape parsers.
#include "nexus/train/memory_plan.h"

#include <gtest/gtest.h>

#include "nexus/core/allocator.h"
#include "nexus/train/model_shape.h"
#include "nexus/train/train_model.h"

namespace nexus::train {
namespace {

ModelConfig tiny() {
  auto c = parse_model_shape("32,2,4,2,64,64");
  EXPECT_TRUE(c.is_ok());
  c.value().n_ctx_train = 16;
  return c.value();
}

TEST(MemoryPlan, BreakdownIsWhatATrainingStepUses) {
  const ModelConfig cfg = tiny();
  auto b = measure_training_memory(cfg, 3, 16, {});
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  const uint64_t before = mem_stats().total_current;
  auto m = TrainModel::create(cfg, 3, 16);
  ASSERT_TRUE(m.is_ok());
  const uint64_t n = m.value()->params().size();
  EXPECT_EQ(b.value().params, n * 4);  // counted as requested (unrounded)
  EXPECT_EQ(b.value().grads, n * 4);
  auto opt = make_optimizer(*m.value(), {});
  ASSERT_TRUE(opt.is_ok());
  EXPECT_EQ(b.value().optimizer, 2 * n * 4);           // AdamW's two moments
  EXPECT_GT(b.value().activations, 3u * 16 * 64 * 4);  // at least the logits
  // Everything built equals the breakdown, and a full step (forward, backward, update) neither
  // allocates nor raises the peak: the breakdown is the step's memory.
  const uint64_t built = mem_stats().total_current - before;
  EXPECT_EQ(built, b.value().total());
  const uint64_t peak = mem_stats().total_peak;
  std::vector<int32_t> x(3 * 16), y(3 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i % 64), y[i] = (x[i] + 1) % 64;
  m.value()->forward(x, y, 3, 16);
  m.value()->backward();
  opt.value()->step(m.value()->params(), m.value()->grads(), 1e-3f);
  EXPECT_EQ(mem_stats().total_current - before, built);
  EXPECT_EQ(mem_stats().total_peak, peak);
  // The unknown optimizer is reported as make_optimizer reports it.
  OptimizerOptions bad;
  bad.name = "lion";
  EXPECT_FALSE(measure_training_memory(cfg, 1, 16, bad).is_ok());
}

TEST(MemoryPlan, FindsTheExactBoundary) {
  const ModelConfig cfg = tiny();
  for (int64_t want : {1, 5, 37}) {
    const uint64_t at = measure_training_memory(cfg, want, 16, {}).value().total();
    const uint64_t next = measure_training_memory(cfg, want + 1, 16, {}).value().total();
    ASSERT_LT(at, next);
    for (uint64_t budget : {at, next - 1}) {
      auto fit = find_max_batch(cfg, 16, {}, budget, 1000);
      ASSERT_TRUE(fit.is_ok());
      EXPECT_EQ(fit.value().batch, want) << budget;
      EXPECT_EQ(fit.value().at.total(), at);
      EXPECT_EQ(fit.value().next.total(), next);
      EXPECT_LE(fit.value().builds, 6);  // the linear prediction lands at or next to it
    }
    EXPECT_EQ(find_max_batch(cfg, 16, {}, at - 1, 1000).value().batch, want - 1);
  }
  EXPECT_EQ(find_max_batch(cfg, 16, {}, 1ull << 40, 7).value().batch, 7);  // --max-batch
}

TEST(MemoryPlan, SizeAndShapeParsing) {
  EXPECT_EQ(parse_byte_size("4GiB").value(), 4ull << 30);
  EXPECT_EQ(parse_byte_size("512 mib").value(), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5GB").value(), 1500000000ull);
  EXPECT_EQ(parse_byte_size("123").value(), 123ull);
  EXPECT_EQ(parse_byte_size("64KiB").value(), 65536ull);
  for (const char* bad : {"", "GiB", "4XB", "-1GiB", "0", "1e30TiB", "4 GiB x"})
    EXPECT_FALSE(parse_byte_size(bad).is_ok()) << bad;
  EXPECT_EQ(format_bytes(640), "640 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  auto c = parse_model_shape("288,6,6,6,768,32000");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c.value().head_dim, 48);
  EXPECT_EQ(c.value().n_vocab, 32000);
  EXPECT_EQ(parse_model_shape("32,2,4,2,64").value().n_vocab, 0);
  EXPECT_NE(parse_model_shape("32,2,x,2,64").status().message().find("'x' is not an integer"),
            std::string::npos);
  EXPECT_FALSE(parse_model_shape("32,2,4,2").is_ok());
  EXPECT_FALSE(parse_model_shape("32,2,3,1,64").is_ok());  // dim % heads
  EXPECT_FALSE(parse_model_shape("32,2,4,2,64,0").is_ok());
  EXPECT_FALSE(parse_model_shape("32,2,4,2,64x").is_ok());
}

}  // namespace
}  // namespace nexus::train
