// `nexus train --arch gpt2|qwen2` and `--grad-checkpoint` through the CLI: a new gpt2 or qwen2
// trains, exports and runs; checkpointing leaves every loss bit-identical and lowers the reported
// activation memory; find-batch-size fits a larger batch with it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "e2e/cli_util.h"
#include "e2e/jsonl_util.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

double activation_mib(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(R"(activations ([0-9.]+) MiB)"))) return -1;
  return std::stod(m[1]);
}

class TrainArchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "nexus_train_arch_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream f(dir_ + "/text.txt");
    for (int i = 0; i < 80; ++i) f << "the cat sat on the mat and the dog ran to the log\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string train(const std::string& extra) const {
    return "train --shape 32,2,4,4,64 --tokenizer " + quoted(tok_) + " --data " +
           quoted(dir_ + "/text.txt") + " --batch 4 --seq 16 --lr 1e-2 --seed 7 -t 1 " + extra;
  }
  std::string dir_;
  const std::string tok_ = fixtures_dir() + "/train/llama_tied.gguf";
};

TEST_F(TrainArchCli, Gpt2TrainsWithAndWithoutCheckpointingToTheSameLosses) {
  CliResult a = run_cli(train("--arch gpt2 --steps 30 --metrics " + quoted(dir_ + "/a.jsonl") +
                              " -o " + quoted(dir_ + "/a.gguf")));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.err.find("train: gpt2,"), std::string::npos) << a.err;
  CliResult b = run_cli(train("--arch gpt2 --steps 30 --grad-checkpoint --metrics " +
                              quoted(dir_ + "/b.jsonl") + " -o " + quoted(dir_ + "/b.gguf")));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.err.find("(gradient checkpointing)"), std::string::npos) << b.err;
  EXPECT_LT(activation_mib(b.err), activation_mib(a.err)) << a.err << b.err;
  const auto la = jsonl(dir_ + "/a.jsonl"), lb = jsonl(dir_ + "/b.jsonl");
  ASSERT_EQ(la.size(), 30u);
  ASSERT_EQ(lb.size(), 30u);
  for (size_t i = 0; i < la.size(); ++i)
    EXPECT_EQ(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>()) << "step " << i + 1;
  EXPECT_LT(la.back()["loss"].get<double>(), 0.5 * la.front()["loss"].get<double>());
  CliResult info = run_cli("info " + quoted(dir_ + "/a.gguf"));
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("gpt2"), std::string::npos) << info.out;
  CliResult run = run_cli("run -m " + quoted(dir_ + "/a.gguf") + " -p 'the cat' -n 6 --temp 0");
  ASSERT_EQ(run.code, 0) << run.output;
}

// A new qwen2 (q/k/v biases, NeoX RoPE) trains under bf16 with checkpointing and selective
// recompute alike, exports a GGUF that `nexus run` loads as qwen2, and fine-tunes from it.
TEST_F(TrainArchCli, Qwen2TrainsExportsRunsAndFineTunes) {
  CliResult a = run_cli(train("--arch qwen2 --steps 30 --metrics " + quoted(dir_ + "/a.jsonl") +
                              " -o " + quoted(dir_ + "/a.gguf")));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.err.find("train: qwen2,"), std::string::npos) << a.err;
  const auto la = jsonl(dir_ + "/a.jsonl");
  ASSERT_EQ(la.size(), 30u);
  EXPECT_LT(la.back()["loss"].get<double>(), 0.5 * la.front()["loss"].get<double>());
  CliResult b = run_cli(train("--arch qwen2 --steps 30 --grad-checkpoint --metrics " +
                              quoted(dir_ + "/b.jsonl") + " -o " + quoted(dir_ + "/b.gguf")));
  ASSERT_EQ(b.code, 0) << b.output;
  const auto lb = jsonl(dir_ + "/b.jsonl");
  ASSERT_EQ(lb.size(), 30u);
  for (size_t i = 0; i < la.size(); ++i)
    EXPECT_EQ(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>()) << "step " << i + 1;
  CliResult c = run_cli(train("--arch qwen2 --steps 5 --precision bf16 --selective-recompute -o " +
                              quoted(dir_ + "/c.gguf")));
  ASSERT_EQ(c.code, 0) << c.output;
  CliResult info = run_cli("info " + quoted(dir_ + "/a.gguf") + " --tensors");
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("qwen2"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("blk.1.attn_k.bias"), std::string::npos) << info.out;
  CliResult run = run_cli("run -m " + quoted(dir_ + "/a.gguf") + " -p 'the cat' -n 6 --temp 0");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(run.out.rfind("the cat", 0), 0u) << run.out;
  CliResult tune = run_cli("train --init " + quoted(dir_ + "/a.gguf") + " --data " +
                           quoted(dir_ + "/text.txt") + " --batch 4 --seq 16 --steps 3 -t 1 -o " +
                           quoted(dir_ + "/d.gguf"));
  ASSERT_EQ(tune.code, 0) << tune.output;
  EXPECT_NE(tune.err.find("qwen2"), std::string::npos) << tune.err;
}

// A new qwen3 (per-head q/k RMSNorm) trains to the same losses with checkpointing and with
// selective recompute, exports a GGUF that `nexus run` loads as qwen3, and trains in bf16.
TEST_F(TrainArchCli, Qwen3TrainsInEveryF32MemoryModeAndRuns) {
  std::vector<std::vector<nlohmann::json>> runs;
  for (const char* mode : {"", "--grad-checkpoint", "--selective-recompute"}) {
    const std::string m = dir_ + "/m" + std::to_string(runs.size()) + ".jsonl";
    CliResult r = run_cli(train(std::string("--arch qwen3 --steps 20 ") + mode + " --metrics " +
                                quoted(m) + " -o " + quoted(dir_ + "/q.gguf")));
    ASSERT_EQ(r.code, 0) << mode << ": " << r.output;
    EXPECT_NE(r.err.find("train: qwen3,"), std::string::npos) << r.err;
    runs.push_back(jsonl(m));
    ASSERT_EQ(runs.back().size(), 20u) << mode;
  }
  for (size_t i = 0; i < 20; ++i)
    for (size_t k = 1; k < runs.size(); ++k)
      EXPECT_EQ(runs[k][i]["loss"].get<double>(), runs[0][i]["loss"].get<double>())
          << "run " << k << " step " << i + 1;
  EXPECT_LT(runs[0].back()["loss"].get<double>(), 0.5 * runs[0].front()["loss"].get<double>());
  CliResult info = run_cli("info " + quoted(dir_ + "/q.gguf") + " --tensors");
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("blk.0.attn_q_norm.weight"), std::string::npos) << info.out;
  CliResult run = run_cli("run -m " + quoted(dir_ + "/q.gguf") + " -p 'the cat' -n 6 --temp 0");
  ASSERT_EQ(run.code, 0) << run.output;
  CliResult bf16 = run_cli(train("--arch qwen3 --steps 20 --precision bf16 --metrics " +
                                 quoted(dir_ + "/h.jsonl") + " -o " + quoted(dir_ + "/x.gguf")));
  ASSERT_EQ(bf16.code, 0) << bf16.output;
  const auto lh = jsonl(dir_ + "/h.jsonl");
  ASSERT_EQ(lh.size(), 20u);
  EXPECT_LT(lh.back()["loss"].get<double>(), 0.5 * lh.front()["loss"].get<double>());
}

// The state-space architectures train with the same losses in every f32 memory mode, learn,
// export a file that `nexus run` reads and `--init` fine-tunes, and train with bf16 activations.
TEST_F(TrainArchCli, MambaTrainsInEveryF32MemoryModeRunsAndFineTunes) {
  for (const char* arch : {"mamba", "mamba2", "granitehybrid"}) {
    const std::string a = arch;
    const std::string shape = a == "mamba"    ? "32,2,1,1,64"
                              : a == "mamba2" ? "32,2,4,2,64"
                                              : "32,4,4,2,48 --attention-layers 1";
    auto cmd = [&](const std::string& extra) {
      return "train --arch " + std::string(arch) + " --shape " + shape + " --tokenizer " +
             quoted(tok_) + " --data " + quoted(dir_ + "/text.txt") +
             " --batch 4 --seq 16 --lr 1e-2 --seed 7 -t 2 " + extra;
    };
    std::vector<std::vector<nlohmann::json>> runs;
    for (const char* mode : {"", "--grad-checkpoint", "--selective-recompute"}) {
      const std::string m = dir_ + "/" + arch + std::to_string(runs.size()) + ".jsonl";
      CliResult r = run_cli(cmd(std::string("--steps 20 ") + mode + " --metrics " + quoted(m) +
                                " -o " + quoted(dir_ + "/s.gguf")));
      ASSERT_EQ(r.code, 0) << arch << " " << mode << ": " << r.output;
      EXPECT_NE(r.err.find(std::string("train: ") + arch + ","), std::string::npos) << r.err;
      runs.push_back(jsonl(m));
      ASSERT_EQ(runs.back().size(), 20u) << mode;
    }
    for (size_t i = 0; i < 20; ++i)
      for (size_t k = 1; k < runs.size(); ++k)
        EXPECT_EQ(runs[k][i]["loss"].get<double>(), runs[0][i]["loss"].get<double>())
            << arch << " run " << k << " step " << i + 1;
    EXPECT_LT(runs[0].back()["loss"].get<double>(), 0.5 * runs[0].front()["loss"].get<double>())
        << arch;
    CliResult info = run_cli("info " + quoted(dir_ + "/s.gguf") + " --tensors");
    ASSERT_EQ(info.code, 0) << info.output;
    EXPECT_NE(info.out.find("blk.0.ssm_conv1d.weight"), std::string::npos) << info.out;
    if (a == "granitehybrid") {  // layer 1 attends, the others scan
      EXPECT_NE(info.out.find("blk.1.attn_q.weight"), std::string::npos) << info.out;
      EXPECT_EQ(info.out.find("blk.1.ssm_in.weight"), std::string::npos) << info.out;
      EXPECT_NE(info.out.find("blk.2.ssm_in.weight"), std::string::npos) << info.out;
    }
    CliResult run = run_cli("run -m " + quoted(dir_ + "/s.gguf") + " -p 'the cat' -n 6 --temp 0");
    ASSERT_EQ(run.code, 0) << run.output;
    CliResult tune = run_cli("train --init " + quoted(dir_ + "/s.gguf") + " --data " +
                             quoted(dir_ + "/text.txt") + " --batch 4 --seq 16 --steps 2 -o " +
                             quoted(dir_ + "/t.gguf"));
    ASSERT_EQ(tune.code, 0) << tune.output;
    // bf16 activations: it learns, and checkpointing rebuilds the same rounded values.
    std::vector<std::vector<nlohmann::json>> half;
    for (const char* mode : {"", "--grad-checkpoint"}) {
      const std::string m = dir_ + "/" + a + "h" + std::to_string(half.size()) + ".jsonl";
      CliResult r = run_cli(cmd(std::string("--steps 20 --precision bf16 ") + mode +
                                " --metrics " + quoted(m) + " -o " + quoted(dir_ + "/x.gguf")));
      ASSERT_EQ(r.code, 0) << arch << " bf16 " << mode << ": " << r.output;
      half.push_back(jsonl(m));
      ASSERT_EQ(half.back().size(), 20u);
    }
    for (size_t i = 0; i < 20; ++i)
      EXPECT_EQ(half[1][i]["loss"].get<double>(), half[0][i]["loss"].get<double>())
          << arch << " bf16 step " << i + 1;
    EXPECT_LT(half[0].back()["loss"].get<double>(), 0.5 * half[0].front()["loss"].get<double>())
        << arch;
  }
}

// A sliding-window llama fine-tunes from its GGUF and keeps its window in the export.
TEST_F(TrainArchCli, SlidingWindowModelFineTunesAndKeepsItsWindow) {
  const std::string swa = fixtures_dir() + "/train/llama_swa.gguf";
  CliResult r = run_cli("train --init " + quoted(swa) + " --data " + quoted(dir_ + "/text.txt") +
                        " --batch 2 --seq 11 --steps 3 -t 1 -o " + quoted(dir_ + "/s.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  CliResult info = run_cli("info " + quoted(dir_ + "/s.gguf") + " --metadata");
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.out.find("llama.attention.sliding_window"), std::string::npos) << info.out;
  CliResult run = run_cli("run -m " + quoted(dir_ + "/s.gguf") + " -n 12 --temp 0");
  ASSERT_EQ(run.code, 0) << run.output;
}

TEST_F(TrainArchCli, ArchErrors) {
  CliResult r = run_cli(train("--arch rwkv --steps 1 -o " + quoted(dir_ + "/x.gguf")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown architecture 'rwkv'"), std::string::npos) << r.err;
  r = run_cli("train --init " + quoted(tok_) + " --arch gpt2 --data " +
              quoted(dir_ + "/text.txt") + " --steps 1 -o " + quoted(dir_ + "/x.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--arch goes with --shape"), std::string::npos) << r.err;
}

TEST(FindBatchSizeArchCli, CheckpointingFitsALargerBatch) {
  auto batch = [](const std::string& extra) -> long {
    CliResult r = run_cli("find-batch-size --shape 64,4,4,4,128,96 --seq 64 --memory-budget 8MiB " +
                          extra);
    EXPECT_EQ(r.code, 0) << r.output;
    std::smatch m;
    if (!std::regex_search(r.out, m, std::regex(R"(^batch (\d+))"))) return -1;
    return std::stol(m[1]);
  };
  const long plain = batch(""), ckpt = batch("--grad-checkpoint");
  const long gpt2 = batch("--arch gpt2 --grad-checkpoint");
  EXPECT_GT(plain, 0);
  EXPECT_GT(ckpt, plain);
  EXPECT_GT(gpt2, 0);
}

// --sliding-window with --shape: the window is exported, and run reads it back; other
// architectures and negative sizes are one-line errors.
TEST_F(TrainArchCli, SlidingWindowTrainsAndIsExported) {
  CliResult a = run_cli(train("--sliding-window 4 --steps 5 -o " + quoted(dir_ + "/w.gguf")));
  ASSERT_EQ(a.code, 0) << a.output;
  CliResult info = run_cli("info " + quoted(dir_ + "/w.gguf"));
  EXPECT_NE(info.out.find("attention.sliding_window           4"), std::string::npos) << info.out;
  CliResult run = run_cli("run -m " + quoted(dir_ + "/w.gguf") + " -p 'the cat' -n 6 --temp 0");
  EXPECT_EQ(run.code, 0) << run.output;
  for (const std::string& bad :
       {std::string("--arch gpt2 --sliding-window 4"), std::string("--sliding-window -2")}) {
    CliResult r = run_cli(train(bad + " --steps 1 -o " + quoted(dir_ + "/x.gguf")));
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("--sliding-window takes a positive size"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace nexus::test
