// nexus-ltm from the command line: `nexus train --arch nexus-ltm` trains and exports it, `nexus
// info` shows its memory keys, `nexus run` generates past the trained length with the memory
// statistics, `nexus memory-reduce` shrinks the memory (and a reduced model is not trained),
// `--memory-rope before` is written to the file, bad flags are one-line errors, and Titans' deep
// memory goes from train (and a checkpoint, exported or resumed) to run and memory-reduce.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

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
  auto bad_rope = run_cli(flags + " --seq 32 --memory-rope sideways -o " + quoted(model));
  EXPECT_NE(bad_rope.code, 0);
  EXPECT_NE(bad_rope.err.find("--memory-rope takes before or after"), std::string::npos)
      << bad_rope.err;
  auto tr = run_cli(flags + " --seq 32 -o " + quoted(model));
  ASSERT_EQ(tr.code, 0) << tr.output;
  auto info = run_cli("info " + quoted(model));
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("nexus-ltm"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("memory.segment_length"), std::string::npos) << info.out;
  EXPECT_TRUE(std::regex_search(info.out, std::regex(R"(memory\.rope\W+after)"))) << info.out;
  // The memory on q and k before RoPE: written to the file, and the model runs.
  const std::string plain = (dir / "ltm_plain.gguf").string();
  auto tr_plain = run_cli(flags + " --seq 32 --memory-rope before -o " + quoted(plain));
  ASSERT_EQ(tr_plain.code, 0) << tr_plain.output;
  auto info_plain = run_cli("info " + quoted(plain));
  EXPECT_TRUE(std::regex_search(info_plain.out, std::regex(R"(memory\.rope\W+before)")))
      << info_plain.out;
  auto run_plain = run_cli("run -m " + quoted(plain) + " -p ROMEO -n 40 --temp 0 -t 1");
  EXPECT_EQ(run_plain.code, 0) << run_plain.output;
  // 200 tokens from a model trained on 32: the cache holds one segment, the memory the rest.
  auto run = run_cli("run -m " + quoted(model) +
                     " -p ROMEO -n 200 --ignore-eos --temp 0 -t 1 "
                     "--memory-stats");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.err.find("generated: 200 tokens"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("long-term memory (infini): 1 heads a layer, slots of 16 values (2176 "
                         "bytes in all)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("slots holding 90%"), std::string::npos) << run.err;

  // Slot reduction: half the slots from a calibration text; run reports the smaller memory.
  const std::string small = (dir / "small.gguf").string();
  const std::string reduce = "memory-reduce " + quoted(model) + " " + quoted(small) + " -f " +
                             quoted((dir / "text.txt").string()) + " -t 1";
  auto red = run_cli(reduce + " --memory-compression-ratio 2");
  ASSERT_EQ(red.code, 0) << red.output;
  EXPECT_NE(red.out.find("32 -> 16 slots (memory 2.00x smaller)"), std::string::npos) << red.out;
  EXPECT_NE(red.err.find("layer  1:   8 of 16 slots"), std::string::npos) << red.err;
  auto run_small = run_cli("run -m " + quoted(small) +
                           " -p ROMEO -n 40 --ignore-eos --temp 0 -t 1 --memory-stats");
  ASSERT_EQ(run_small.code, 0) << run_small.output;
  EXPECT_NE(run_small.err.find("(1088 bytes in all)"), std::string::npos) << run_small.err;
  auto info_small = run_cli("info " + quoted(small));
  EXPECT_NE(info_small.out.find("memory.slots"), std::string::npos) << info_small.out;
  for (const std::string& wrong :
       {std::string(" --memory-compression-ratio 0.5"), std::string(" --adaptive"),
        std::string(" --memory-compression-ratio 2 --memory-energy 0.9"), std::string("")}) {
    auto r = run_cli(reduce + wrong);
    EXPECT_EQ(r.code, 2) << wrong << ": " << r.output;
    EXPECT_NE(r.err.find("memory-reduce: error: "), std::string::npos) << r.err;
  }
  auto again = run_cli("memory-reduce " + quoted(small) + " " + quoted(model + ".2") + " -f " +
                       quoted((dir / "text.txt").string()) + " --memory-energy 0.9");
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.err.find("already reduced"), std::string::npos) << again.err;
  auto train_small =
      run_cli("train --init " + quoted(small) + " --data " + quoted((dir / "text.txt").string()) +
              " --seq 32 --steps 1 -o " + quoted(model + ".3"));
  EXPECT_NE(train_small.code, 0);
  EXPECT_NE(train_small.err.find("slot-reduced memory"), std::string::npos) << train_small.err;

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

TEST(LtmCli, TitansDeepMemoryFromTrainToRun) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("nexus_ltm_deep_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "text.txt");
    for (int i = 0; i < 30; ++i)
      f << "JULIET: O Romeo, Romeo, wherefore art thou Romeo? " << i << "\n";
  }
  const std::string demo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  const std::string model = (dir / "deep.gguf").string();
  const std::string flags =
      "train --arch nexus-ltm --shape 32,2,2,1,64 --memory-segment 16 "
      "--tokenizer " +
      quoted(demo) + " --data " + quoted((dir / "text.txt").string()) +
      " --batch 2 --seq 32 --steps 3 -t 1 -o " + quoted(model);
  for (const auto& [wrong, message] :
       {std::pair<std::string, std::string>{" --memory-kind titans --memory-depth 3",
                                            "--memory-depth takes 1 (linear) or 2"},
        {" --memory-depth 2",
         "--memory-depth and --memory-hidden take --arch nexus-ltm "
         "--memory-kind titans"},
        {" --memory-kind titans --memory-depth 1 --memory-hidden 8",
         "--memory-hidden takes --memory-depth 2"},
        {" --memory-kind titans --memory-forget 1.5", "--memory-forget takes a rate in (0, 1)"}}) {
    auto r = run_cli(flags + wrong);
    EXPECT_NE(r.code, 0) << wrong;
    EXPECT_NE(r.err.find(message), std::string::npos) << wrong << ": " << r.err;
  }
  const std::string ckpt = (dir / "ckpt").string();
  auto tr = run_cli(flags + " --memory-kind titans --memory-depth 2 --memory-forget 0.01" +
                    " --checkpoint-dir " + quoted(ckpt));
  ASSERT_EQ(tr.code, 0) << tr.output;
  // The checkpoint keeps the memory's settings: exported, it is the model train wrote; resumed,
  // it trains on.
  const std::string exported = (dir / "exported.gguf").string();
  auto ex = run_cli("export --checkpoint " + quoted(ckpt) + " -o " + quoted(exported));
  ASSERT_EQ(ex.code, 0) << ex.output;
  const std::string gen = " -p JULIET -n 12 --temp 0 -t 1";
  auto a = run_cli("run -m " + quoted(model) + gen),
       b = run_cli("run -m " + quoted(exported) + gen);
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(a.out, b.out);
  auto resumed = run_cli("train --resume " + quoted(ckpt) + " --steps 4 -t 1 -o " +
                         quoted((dir / "resumed.gguf").string()));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  auto info = run_cli("info " + quoted(model));
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_TRUE(std::regex_search(info.out, std::regex(R"(memory\.depth\W+2)"))) << info.out;
  // The hidden width defaults to twice the head size (16).
  EXPECT_TRUE(std::regex_search(info.out, std::regex(R"(memory\.hidden\W+32)"))) << info.out;
  auto run = run_cli("run -m " + quoted(model) +
                     " -p JULIET -n 60 --ignore-eos --temp 0 -t 1 --memory-stats");
  ASSERT_EQ(run.code, 0) << run.output;
  // 2 layers x 1 head x (D1, D2, S1, S2: 4 x 16 x 32 floats).
  EXPECT_NE(run.err.find("long-term memory (titans, an MLP): 1 heads a layer, slots (hidden units) "
                         "of 16 values (16384 bytes in all)"),
            std::string::npos)
      << run.err;
  auto init =
      run_cli("train --init " + quoted(model) + " --data " + quoted((dir / "text.txt").string()) +
              " --seq 32 --steps 1 --memory-depth 1 -o " + quoted(model + ".2"));
  EXPECT_NE(init.code, 0);
  EXPECT_NE(init.err.find("--memory-depth goes with --shape"), std::string::npos) << init.err;
  // Slot reduction keeps half the hidden units: half the memory, and the model still runs.
  const std::string small = model + ".small";
  auto red = run_cli("memory-reduce " + quoted(model) + " " + quoted(small) + " -f " +
                     quoted((dir / "text.txt").string()) + " --memory-compression-ratio 2");
  ASSERT_EQ(red.code, 0) << red.output;
  EXPECT_NE(red.err.find("layer  1:  16 of 32 hidden units"), std::string::npos) << red.err;
  EXPECT_NE(red.out.find("64 -> 32 slots (memory 2.00x smaller)"), std::string::npos) << red.out;
  auto run_small = run_cli("run -m " + quoted(small) +
                           " -p JULIET -n 60 --ignore-eos --temp 0 -t 1 --memory-stats");
  ASSERT_EQ(run_small.code, 0) << run_small.output;
  EXPECT_NE(run_small.err.find("slots (hidden units) of 16 values (8192 bytes in all)"),
            std::string::npos)
      << run_small.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test
