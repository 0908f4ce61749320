// The optimization ladder on stories260K: all eight steps run, the F32 steps (no KV cache, naive
// attention, flash attention, threads) generate exactly the Base step's greedy tokens, and the
// markdown table and chart have one row / bar per step; a step a model cannot take is skipped.
#include "harness/ladder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "harness/random_model.h"
#include "test_paths.h"

namespace nexus {
namespace {

TEST(Ladder, StepsAreTheEightRungs) {
  const auto steps = ladder_steps(3);
  ASSERT_EQ(steps.size(), 8u);
  EXPECT_EQ(steps[0].name, "Base");
  EXPECT_FALSE(steps[0].kv_cache);
  EXPECT_EQ(steps[0].attention, AttentionImpl::kNaive);
  EXPECT_EQ(steps[0].n_threads, 1);
  EXPECT_TRUE(steps[1].kv_cache);
  EXPECT_EQ(steps[2].attention, AttentionImpl::kFlash);
  EXPECT_EQ(steps[3].n_threads, 3);
  EXPECT_EQ(steps[4].weights, DType::kF16);
  EXPECT_EQ(steps[5].weights, DType::kQ8_0);
  EXPECT_EQ(steps[6].weights, DType::kQ4_K);
  EXPECT_EQ(steps[7].kv_type, DType::kQ8_0);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(steps[i].kv_type, DType::kF32);
}

TEST(Ladder, Stories260KGeneratesTheSameTokensOnEveryF32Step) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto model = Model::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  LadderOptions opts;
  opts.n_prompt = 12;
  opts.n_gen = 24;
  opts.n_threads = 2;
  opts.repetitions = 1;
  auto rows = run_ladder(*model.value(), opts);
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  ASSERT_EQ(rows.value().size(), 8u);
  for (size_t i = 0; i < rows.value().size(); ++i) {
    const LadderRow& r = rows.value()[i];
    SCOPED_TRACE(r.step.name);
    EXPECT_EQ(r.tokens.size(), 24u);
    EXPECT_GT(r.tokens_per_s, 0);
    EXPECT_GT(r.weight_bytes, 0u);
    EXPECT_GT(r.kv_bytes, 0u);
    EXPECT_GT(r.activation_bytes, 0u);
    if (i < 4) {
      EXPECT_TRUE(r.same_tokens_as_base);
      EXPECT_EQ(r.weight_types, "F32");
    }
  }
  EXPECT_DOUBLE_EQ(rows.value()[0].speedup_base, 1.0);
  // Smaller weights and KV cache down the ladder.
  EXPECT_LT(rows.value()[4].weight_bytes, rows.value()[3].weight_bytes);
  EXPECT_LT(rows.value()[5].weight_bytes, rows.value()[4].weight_bytes);
  EXPECT_LT(rows.value()[7].kv_bytes, rows.value()[6].kv_bytes);

  const std::string md = ladder_to_markdown(rows.value(), opts, "stories260K");
  size_t lines = 0;
  for (size_t p = md.find("\n|"); p != std::string::npos; p = md.find("\n|", p + 1)) ++lines;
  EXPECT_EQ(lines, 9u);  // separator + 8 steps after the header line
  for (const char* step :
       {"| Base |", "| +KV cache |", "| +flash attention |", "| +threads |", "| +F16 weights |",
        "| +Q8_0 weights |", "| +Q4_K weights |", "| +Q8_0 KV cache |"})
    EXPECT_NE(md.find(step), std::string::npos) << step;
  EXPECT_EQ(ladder_chart(rows.value(), "stories260K").groups.size(), 8u);
}

// KV rows of 2 heads x 12 do not fill a Q8_0 block: the last step is skipped, not an error.
TEST(Ladder, StepTheModelCannotTakeIsSkipped) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nexus_ladder_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  GenModelOptions o;
  auto shape = parse_model_shape("custom:dim=48,layers=1,heads=4,kv_heads=2,ffn=64,vocab=300");
  ASSERT_TRUE(shape.is_ok()) << shape.status().message();
  o.shape = shape.value();
  ASSERT_TRUE(write_random_model(o, path).is_ok());
  auto model = Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  LadderOptions opts;
  opts.n_prompt = 4;
  opts.n_gen = 4;
  opts.repetitions = 1;
  auto rows = run_ladder(*model.value(), opts);
  std::filesystem::remove(path);
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  ASSERT_EQ(rows.value().size(), 8u);
  EXPECT_EQ(rows.value()[6].skipped, "");
  EXPECT_NE(rows.value()[7].skipped.find("multiple of 32"), std::string::npos);
  const std::string md = ladder_to_markdown(rows.value(), opts, "tiny");
  EXPECT_NE(md.find("| +Q8_0 KV cache | skipped: KV row width 24"), std::string::npos);
  EXPECT_TRUE(std::isnan(ladder_chart(rows.value(), "tiny").groups[7].values[0]));
}

}  // namespace
}  // namespace nexus
