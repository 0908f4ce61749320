// `nexus find-batch-size`: the printed batch is the largest whose measured training memory fits,
// with its breakdown; bad flags are one-line usage errors.
#include <gtest/gtest.h>

#include <regex>

#include "e2e/cli_util.h"
#include "test_paths.h"
#include "nexus/train/memory_plan.h"
#include "nexus/train/model_shape.h"

namespace nexus::test {
namespace {

TEST(FindBatchSizeCli, PrintsTheLargestFittingBatchAndItsBreakdown) {
  CliResult r = run_cli("find-batch-size --shape 64,2,4,2,128,96 --seq 32 --memory-budget 3MiB");
  ASSERT_EQ(r.code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(^batch (\d+) \(seq 32, adamw\))")))
      << r.out;
  const int64_t batch = std::stoll(m[1]);
  // Independently: build the model at that batch and the next, and read the allocator.
  auto cfg = train::parse_model_shape("64,2,4,2,128,96").value();
  cfg.n_ctx_train = 32;
  const auto at = train::measure_training_memory(cfg, batch, 32, {}).value();
  const auto next = train::measure_training_memory(cfg, batch + 1, 32, {}).value();
  EXPECT_LE(at.total(), 3u << 20);
  EXPECT_GT(next.total(), 3u << 20);
  for (const auto& [name, bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"parameters", at.params},
                                                     {"gradients", at.grads},
                                                     {"adamw state", at.optimizer},
                                                     {"activation arena", at.activations},
                                                     {"total", at.total()}})
    EXPECT_TRUE(std::regex_search(r.out, std::regex(name + R"( +)" + std::to_string(bytes) + " ")))
        << name << " " << bytes << "\n"
        << r.out;
  // From a model file: the fixture's shape, vocab included.
  r = run_cli("find-batch-size --init " + quoted(fixtures_dir() + "/train/llama_tied.gguf") +
              " --seq 8 --memory-budget 1MiB");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.out.rfind("batch ", 0), 0u) << r.out;
}

TEST(FindBatchSizeCli, Errors) {
  struct Case {
    std::string args, message;
    int code;
  };
  const std::vector<Case> cases = {
      {"--shape 64,2,4,2,128,96 --seq 32 --memory-budget 10KiB", "even batch 1 needs", 1},
      {"--shape 64,2,4,2,128,96 --seq 32 --memory-budget 4XB", "'4XB' is not a size", 2},
      {"--shape 64,2,4,2,128 --seq 32 --memory-budget 1GiB", "vocabulary size", 2},
      {"--seq 32 --memory-budget 1GiB", "exactly one of --shape and --init", 2},
      {"--shape 64,2,4,2,128,96 --seq 0 --memory-budget 1GiB", "must be > 0", 2},
      {"--shape 64,2,4,2,128,96 --seq 8 --memory-budget 1GiB --optimizer lion",
       "unknown optimizer 'lion'", 1},
      {"--init /nonexistent.gguf --seq 8 --memory-budget 1GiB", "/nonexistent.gguf", 1},
      {"--shape 64,2,4,2,128,96 --memory-budget 1GiB", "--seq", 2},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli("find-batch-size " + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_EQ(r.err.rfind("nexus find-batch-size: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace nexus::test
