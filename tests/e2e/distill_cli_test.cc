// `nexus distill` end to end: a small student learns from the demo model; with alpha 1 its losses
// are `nexus train`'s exactly (the hard-label loss alone); a checkpointed run resumes with its
// teacher; bad flags and a teacher of another vocabulary are one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

const std::string kDemo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";

class DistillCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("nexus_distill_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream f(path("text.txt"));
    for (int i = 0; i < 30; ++i)
      f << "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet "
           "is the sun. JULIET: O Romeo, Romeo, wherefore art thou Romeo?\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string common() const {
    return " --shape 32,2,2,2,64 --tokenizer " + quoted(kDemo) + " --data " +
           quoted(path("text.txt")) + " --batch 2 --seq 32 --steps 12 --lr 1e-2 -t 1 --seed 5";
  }
  fs::path dir_;
};

TEST_F(DistillCli, StudentLearnsAndAlphaOneIsPlainTraining) {
  auto d = run_cli("distill --teacher " + quoted(kDemo) + common() + " -o " + quoted(path("s.gguf")));
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.err.find("teacher"), std::string::npos) << d.err;
  const std::vector<double> l = step_losses(d.err);
  ASSERT_EQ(l.size(), 12u) << d.err;
  EXPECT_LT(l.back(), l.front()) << d.err;
  auto run = run_cli("run -m " + quoted(path("s.gguf")) + " -p ROMEO: -n 4 --temp 0");
  EXPECT_EQ(run.code, 0) << run.output;
  // alpha 1: the loss is the cross-entropy alone, step for step.
  auto a1 = run_cli("distill --alpha 1 --teacher " + quoted(kDemo) + common() + " -o " +
                    quoted(path("a1.gguf")));
  auto t = run_cli("train" + common() + " -o " + quoted(path("t.gguf")));
  ASSERT_EQ(a1.code, 0) << a1.output;
  ASSERT_EQ(t.code, 0) << t.output;
  const std::vector<double> la = step_losses(a1.err), lt = step_losses(t.err);
  ASSERT_EQ(la.size(), lt.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lt[i], 2e-4) << "step " << i + 1;
  // The soft targets change the run.
  EXPECT_GT(std::fabs(l.back() - lt.back()), 1e-3);
}

TEST_F(DistillCli, CheckpointsResumeWithTheTeacher) {
  const std::string ck = path("ck");
  auto d = run_cli("distill --teacher " + quoted(kDemo) + common() + " --checkpoint-dir " +
                   quoted(ck) + " --checkpoint-interval 6 --metrics " + quoted(path("m.jsonl")));
  ASSERT_EQ(d.code, 0) << d.output;
  auto r = run_cli("distill --teacher " + quoted(kDemo) + " --resume " + quoted(ck) +
                   " --steps 12 -o " + quoted(path("r.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("r.gguf")));
  EXPECT_TRUE(fs::exists(path("m.jsonl")));
}

TEST_F(DistillCli, BadFlagsAreOneLineErrors) {
  const std::string out = " -o " + quoted(path("x.gguf"));
  struct Case {
    std::string args, needle;
    int code;
  };
  const std::string other = fixtures_dir() + "/models/llama_untied.gguf";
  const Case cases[] = {
      {"distill" + common() + out, "--teacher is required", 2},
      {"distill --teacher " + quoted(kDemo) + " --alpha 1.5" + common() + out, "--alpha", 2},
      {"distill --teacher " + quoted(kDemo) + " --temperature 0" + common() + out,
       "--temperature", 2},
      {"train --temperature 2" + common() + out, "need --teacher", 2},
      {"distill --teacher " + quoted(other) + common() + out, "vocabulary", 1},
      {"distill --teacher " + quoted(path("none.gguf")) + common() + out, "none.gguf", 1},
  };
  for (const Case& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(path("x.gguf"))) << c.args;
  }
}

}  // namespace
}  // namespace nexus::test
