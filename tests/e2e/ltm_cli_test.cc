// nexus-ltm from the command line: `nexus train --arch nexus-ltm` trains and exports it, `nexus
// info` shows its memory keys, `nexus run` generates past the trained length with the memory
// statistics, and a --seq that is not whole segments is a one-line error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

TEST(LtmCli, TrainsRunsAndReportsItsMemory) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("nexus_ltm_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "text.txt");
    for (int i = 0; i < 30; ++i)
      f << "ROMEO: But soft, what light through yonder window breaks? " << i << "\n";
  }
  const std::string demo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  const std::string model = (dir / "ltm.gguf").string();
  const std::string flags =
      "train --arch nexus-ltm --shape 32,2,2,1,64 --memory-segment 16 "
      "--tokenizer " +
      quoted(demo) + " --data " + quoted((dir / "text.txt").string()) + " --batch 2 --steps 3 -t 1";
  auto bad = run_cli(flags + " --seq 40 -o " + quoted(model));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("seq 40 must be a whole number of memory segments of 16"),
            std::string::npos)
      << bad.err;
  auto tr = run_cli(flags + " --seq 32 -o " + quoted(model));
  ASSERT_EQ(tr.code, 0) << tr.output;
  auto info = run_cli("info " + quoted(model));
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("nexus-ltm"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("memory.segment_length"), std::string::npos) << info.out;
  // 200 tokens from a model trained on 32: the cache holds one segment, the memory the rest.
  auto run = run_cli("run -m " + quoted(model) +
                     " -p ROMEO -n 200 --ignore-eos --temp 0 -t 1 "
                     "--memory-stats");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.err.find("generated: 200 tokens"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("long-term memory (infini): 1 heads x 16 slots"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("slots holding 90%"), std::string::npos) << run.err;

  // Passkey samples: the key stated once, asked for at the end, answered; eval scores a model.
  const std::string pk = (dir / "pk.txt").string();
  auto make =
      run_cli("passkey make --tokenizer " + quoted(demo) + " --length 128 -n 4 -o " + quoted(pk));
  ASSERT_EQ(make.code, 0) << make.output;
  std::ifstream in(pk);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    ++samples;
    const size_t q = line.find("What is the pass key? The pass key is ");
    ASSERT_NE(q, std::string::npos) << line;
    const std::string key = line.substr(q + 38, 5);
    EXPECT_NE(line.find("The pass key is " + key + ". Remember it."), std::string::npos) << line;
  }
  EXPECT_EQ(samples, 4);
  auto eval = run_cli("passkey eval -m " + quoted(model) + " --length 128 -n 3 -t 1");
  ASSERT_EQ(eval.code, 0) << eval.output;
  EXPECT_NE(eval.out.find(" of 3 right"), std::string::npos) << eval.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test
