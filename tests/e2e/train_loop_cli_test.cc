// `nexus train` around the loop: token files with validation, metrics and plot, the vocabulary
// checks, gradient accumulation flags, checkpoints (bit-exact resume, SIGKILL safety, a failing
// write) and the usage errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "e2e/cli_util.h"
#include "e2e/jsonl_util.h"
#include "test_paths.h"
#include "nexus/train/checkpoint.h"

extern char** environ;

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A temp dir with text.txt, the fixture tokenizer's data.bin / data.val.bin.
class TrainLoopCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "nexus_train_loop_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream f(dir_ + "/text.txt");
    const char* lines[] = {"the cat sat on the mat", "and the dog ran to the log",
                           "a bird flew over the tree", "then the cat ran after it"};
    for (int i = 0; i < 60; ++i) f << lines[i % 4] << "\n";
    f.close();
    CliResult r = run_cli("tokenize-data -i " + test::quoted(dir_ + "/text.txt") + " -m " +
                          test::quoted(tok_) + " -o " + test::quoted(dir_ + "/data.bin") +
                          " --val-fraction 0.2");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string base(const std::string& extra) const {
    return "train --shape 32,2,4,2,64 --tokenizer " + test::quoted(tok_) + " --data " +
           test::quoted(dir_ + "/data.bin") + " --seq 16 --lr 1e-2 -t 1 " + extra;
  }

  std::string dir_;
  const std::string tok_ = fixtures_dir() + "/train/llama_tied.gguf";
};

TEST_F(TrainLoopCli, TokenFileValidationMetricsAndPlot) {
  CliResult r =
      run_cli(base("--batch 4 --steps 12 --eval-interval 4 --eval-batches 3 --metrics " +
                   test::quoted(dir_ + "/run.jsonl") + " --plot " +
                   test::quoted(dir_ + "/loss.svg") + " -o " + test::quoted(dir_ + "/m.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("validation tokens"), std::string::npos) << r.err;  // the sibling was used
  const auto lines = jsonl(dir_ + "/run.jsonl");
  ASSERT_EQ(lines.size(), 12u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& j = lines[i];
    EXPECT_EQ(j["step"].get<int>(), static_cast<int>(i) + 1);
    for (const char* k : {"loss", "lr", "grad_norm", "tokens_per_s", "tokens", "elapsed_s"})
      EXPECT_TRUE(j.contains(k)) << k << " in " << j.dump();
    EXPECT_EQ(j["tokens"].get<int>(), static_cast<int>(i + 1) * 4 * 16);
    EXPECT_EQ(j.contains("val_loss"), (i + 1) % 4 == 0) << j.dump();
  }
  EXPECT_LT(lines.back()["val_loss"].get<double>(), lines[3]["val_loss"].get<double>());
  EXPECT_NE(r.err.find("step 4/12  loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  val "), std::string::npos) << r.err;
  const std::string svg = slurp(dir_ + "/loss.svg");
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1))
    ++polylines;
  EXPECT_EQ(polylines, 2u);  // train and validation
  EXPECT_NE(svg.find("validation loss"), std::string::npos);
  // The same run from the raw text still works (tokenized on the fly), without validation.
  r = run_cli("train --shape 32,2,4,2,64 --tokenizer " + test::quoted(tok_) + " --data " +
              test::quoted(dir_ + "/text.txt") + " --seq 16 --steps 2 -t 1 -o " +
              test::quoted(dir_ + "/t.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.err.find("validation tokens"), std::string::npos) << r.err;
}

TEST_F(TrainLoopCli, VocabularyChecks) {
  // Data tokenized with another vocabulary (trained here) is refused by name.
  CliResult r = run_cli("train-tokenizer -i " + test::quoted(dir_ + "/text.txt") +
                        " --vocab 300 -o " + test::quoted(dir_ + "/other.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_cli("tokenize-data -i " + test::quoted(dir_ + "/text.txt") + " -m " +
              test::quoted(dir_ + "/other.gguf") + " -o " + test::quoted(dir_ + "/other.bin"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_cli("train --shape 32,2,4,2,64 --tokenizer " + test::quoted(tok_) + " --data " +
              test::quoted(dir_ + "/other.bin") + " --seq 16 --steps 1 -o " +
              test::quoted(dir_ + "/m.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("other.bin was tokenized with a different vocabulary"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/m.gguf"));
  // A model whose vocabulary is smaller than the ids in the data.
  r = run_cli("train --shape 32,2,4,2,64,20 --tokenizer " + test::quoted(tok_) + " --data " +
              test::quoted(dir_ + "/data.bin") + " --seq 16 --steps 1 -o " +
              test::quoted(dir_ + "/m.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("outside the model's vocabulary of 20"), std::string::npos) << r.err;
  // Raw text is tokenized into a temporary file, but the error names the text file.
  r = run_cli("train --shape 32,2,4,2,64,20 --tokenizer " + test::quoted(tok_) + " --data " +
              test::quoted(dir_ + "/text.txt") + " --seq 16 --steps 1 -o " +
              test::quoted(dir_ + "/m.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("text.txt: token "), std::string::npos) << r.err;
}

TEST_F(TrainLoopCli, ResumeIsBitExact) {
  // 10 steps straight (checkpoints at 5 and 10), then 5 + resume 5 from the step-5 checkpoint.
  const std::string common = "--batch 2 --accum 2 --steps 10 --eval-interval 5 ";
  CliResult a =
      run_cli(base(common + "--checkpoint-dir " + test::quoted(dir_ + "/a") +
                   " --checkpoint-interval 5 --keep-checkpoints 5 --metrics " +
                   test::quoted(dir_ + "/a.jsonl") + " -o " + test::quoted(dir_ + "/a.gguf")));
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_TRUE(fs::exists(dir_ + "/a/ckpt-00000005.gguf"));
  // The interrupted run's metrics are a copy of the first 7 lines (2 past the checkpoint).
  {
    std::ifstream in(dir_ + "/a.jsonl");
    std::ofstream out(dir_ + "/b.jsonl");
    std::string line;
    for (int i = 0; i < 7 && std::getline(in, line); ++i) out << line << "\n";
    out << "{\"step\": 8, \"lo";  // a line cut by a kill
  }
  CliResult b = run_cli("train --resume " + test::quoted(dir_ + "/a/ckpt-00000005.gguf") +
                        " --checkpoint-dir " + test::quoted(dir_ + "/b") +
                        " --eval-interval 5 -t 1 " + "--metrics " +
                        test::quoted(dir_ + "/b.jsonl") + " -o " + test::quoted(dir_ + "/b.gguf"));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.err.find("resuming"), std::string::npos);
  const auto la = jsonl(dir_ + "/a.jsonl"), lb = jsonl(dir_ + "/b.jsonl");
  ASSERT_EQ(la.size(), 10u);
  ASSERT_EQ(lb.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(la[i]["step"], lb[i]["step"]);
    EXPECT_EQ(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(la[i]["grad_norm"].get<double>(), lb[i]["grad_norm"].get<double>());
    EXPECT_EQ(la[i].value("val_loss", -1.0), lb[i].value("val_loss", -1.0));
  }
  EXPECT_EQ(slurp(dir_ + "/a.gguf"), slurp(dir_ + "/b.gguf"));  // final parameters, byte for byte
  EXPECT_EQ(slurp(dir_ + "/a/ckpt-00000010.gguf"), slurp(dir_ + "/b/ckpt-00000010.gguf"));
  // A directory resumes from its newest checkpoint: here the final one, so nothing is left.
  CliResult c = run_cli("train --resume " + test::quoted(dir_ + "/a") + " -o " +
                        test::quoted(dir_ + "/c.gguf"));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(slurp(dir_ + "/a.gguf"), slurp(dir_ + "/c.gguf"));
  // Run-shaping flags are refused with --resume.
  CliResult d = run_cli("train --resume " + test::quoted(dir_ + "/a") + " --lr 1 -o " +
                        test::quoted(dir_ + "/d.gguf"));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.err.find("--lr is fixed by the checkpoint"), std::string::npos) << d.err;
  d = run_cli("train --resume " + test::quoted(dir_ + "/a") + " --precision bf16 -o " +
              test::quoted(dir_ + "/d.gguf"));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.err.find("--precision is fixed by the checkpoint"), std::string::npos) << d.err;
}

// SGD (Nesterov), Adafactor, bf16 and fp16 with dynamic loss scaling through the CLI: 6 steps
// straight equal 3 + resume 3, so their state, step count, precision and loss scale all travel in
// the checkpoint; the loss falls with each.
TEST_F(TrainLoopCli, OtherOptimizersAndPrecisionsResumeBitExactly) {
  for (const std::string opt : {"--optimizer sgd --nesterov --momentum 0.8 --weight-decay 0.01",
                                "--optimizer adafactor --adafactor-clip 0.5", "--precision bf16",
                                "--precision f16 --loss-scale-window 2",
                                // the resume runs without these two flags: same numbers
                                "--optimizer-state bf16 --clip 0 --optimizer-in-backward "
                                "--selective-recompute"}) {
    SCOPED_TRACE(opt);
    const std::string a_dir = dir_ + "/oa", b_dir = dir_ + "/ob";
    fs::remove_all(a_dir);
    fs::remove_all(b_dir);
    CliResult a = run_cli(base("--batch 2 --steps 6 --checkpoint-interval 3 --keep-checkpoints 3 " +
                               opt + " --checkpoint-dir " + test::quoted(a_dir) + " --metrics " +
                               test::quoted(a_dir + ".jsonl") + " -o " +
                               test::quoted(a_dir + ".gguf")));
    ASSERT_EQ(a.code, 0) << a.output;
    CliResult b = run_cli("train --resume " + test::quoted(a_dir + "/ckpt-00000003.gguf") +
                          " -t 1 --checkpoint-dir " + test::quoted(b_dir) + " -o " +
                          test::quoted(b_dir + ".gguf"));
    ASSERT_EQ(b.code, 0) << b.output;
    EXPECT_EQ(slurp(a_dir + ".gguf"), slurp(b_dir + ".gguf"));
    EXPECT_EQ(slurp(a_dir + "/ckpt-00000006.gguf"), slurp(b_dir + "/ckpt-00000006.gguf"));
    const auto la = jsonl(a_dir + ".jsonl");
    ASSERT_EQ(la.size(), 6u);
    EXPECT_LT(la[5]["loss"].get<double>(), la[0]["loss"].get<double>());
    if (opt.find("--precision f16") != std::string::npos) {  // doubles every 2 finite steps
      EXPECT_EQ(la[0]["loss_scale"].get<double>(), 65536.0);
      EXPECT_EQ(la[2]["loss_scale"].get<double>(), 131072.0);
      EXPECT_NE(a.err.find("f16, dynamic loss scale 65536"), std::string::npos) << a.err;
    }
    fs::remove(a_dir + ".jsonl");
  }
}

TEST_F(TrainLoopCli, OptimizerInBackwardNamesWhatIsInTheWay) {
  const std::string out = test::quoted(dir_ + "/ib.gguf");
  CliResult r = run_cli(base("--batch 2 --steps 2 --optimizer-in-backward --accum 2 -o " + out));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("gradient accumulation, gradient clipping"), std::string::npos) << r.err;
  r = run_cli(base("--batch 2 --steps 2 --optimizer-state bf16 --optimizer sgd -o " + out));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--optimizer-state bf16 is for adamw"), std::string::npos) << r.err;
  r = run_cli(base("--batch 2 --steps 2 --clip 0 --optimizer-in-backward --optimizer-state bf16 " +
                   std::string("-o ") + out));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("adamw (bf16 state)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("optimizer in backward"), std::string::npos) << r.err;
}

TEST_F(TrainLoopCli, KeepsTheLastCheckpoints) {
  CliResult r = run_cli(base("--batch 2 --steps 7 --checkpoint-dir " + test::quoted(dir_ + "/ck") +
                             " --checkpoint-interval 2"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> left = train::list_checkpoints(dir_ + "/ck");
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(fs::path(left[0]).filename(), "ckpt-00000006.gguf");
  EXPECT_EQ(fs::path(left[1]).filename(), "ckpt-00000007.gguf");  // the final step
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/ck"), fs::directory_iterator()), 2);
}

TEST_F(TrainLoopCli, ExportACheckpoint) {
  CliResult r = run_cli(base("--batch 2 --steps 3 --checkpoint-dir " + test::quoted(dir_ + "/ck") +
                             " -o " + test::quoted(dir_ + "/trained.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  // The checkpoint carries the tokenizer: no --tokenizer needed, and the result is the very file
  // that -o wrote.
  r = run_cli("export --checkpoint " + test::quoted(dir_ + "/ck") + " -o " +
              test::quoted(dir_ + "/e.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find("step 3 of 3"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(dir_ + "/e.gguf"), slurp(dir_ + "/trained.gguf"));
  r = run_cli("run -m " + test::quoted(dir_ + "/e.gguf") + " -p 'the cat' -n 4 --temp 0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.out.rfind("the cat", 0), 0u) << r.out;
  // The same tokenizer given explicitly is accepted; another vocabulary is refused.
  r = run_cli("export --checkpoint " + test::quoted(dir_ + "/ck/ckpt-00000003.gguf") +
              " --tokenizer " + test::quoted(tok_) + " -o " + test::quoted(dir_ + "/e2.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(slurp(dir_ + "/e2.gguf"), slurp(dir_ + "/trained.gguf"));
  ASSERT_EQ(run_cli("train-tokenizer -i " + test::quoted(dir_ + "/text.txt") + " --vocab 300 -o " +
                    test::quoted(dir_ + "/other.gguf"))
                .code,
            0);
  r = run_cli("export --checkpoint " + test::quoted(dir_ + "/ck") + " --tokenizer " +
              test::quoted(dir_ + "/other.gguf") + " -o " + test::quoted(dir_ + "/e3.gguf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not the vocabulary"), std::string::npos) << r.err;
  r = run_cli("export --checkpoint " + test::quoted(dir_ + "/text.txt") + " -o x.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nexus export: error: checkpoint"), std::string::npos) << r.err;
  r = run_cli("export -o x.gguf");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--checkpoint"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/e3.gguf"));
  // -o naming the checkpoint would replace it (its optimizer state and data position lost).
  const std::string ck = dir_ + "/ck/ckpt-00000003.gguf", before = slurp(ck);
  r = run_cli("export --checkpoint " + test::quoted(ck) + " -o " + test::quoted(ck));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("writing it would replace the input"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(ck), before);
}

TEST_F(TrainLoopCli, ConfigFileWithFlagOverrides) {
  {
    std::ofstream f(dir_ + "/run.toml");
    f << "# a run\nshape = \"32,2,4,2,64\"\ntokenizer = \"" << tok_ << "\"\ndata = \"" << dir_
      << "/data.bin\"\nseq = 16\nbatch = 2\nsteps = 3\nlr = 0.01\n"
      << "accum = 2\nschedule = \"constant\"\nmetrics = \"" << dir_ << "/run.jsonl\"\n";
  }
  // --steps on the command line wins over the file's 3.
  CliResult r = run_cli("train --config " + test::quoted(dir_ + "/run.toml") +
                        " --steps 4 -t 1 -o " + test::quoted(dir_ + "/m.gguf"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("batch 2 x seq 16 x accum 2"), std::string::npos) << r.err;
  const auto lines = jsonl(dir_ + "/run.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NEAR(lines[3]["lr"].get<double>(), 0.01, 1e-9);  // constant schedule from the file
  EXPECT_EQ(lines[3]["tokens"].get<int>(), 4 * 2 * 2 * 16);
  // A key that is no flag, and a missing file, are usage errors.
  std::ofstream(dir_ + "/bad.toml") << "batchsize = 3\n";
  r = run_cli("train --config " + test::quoted(dir_ + "/bad.toml"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("batchsize"), std::string::npos) << r.err;
  r = run_cli("train --config " + test::quoted(dir_ + "/missing.toml"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.toml"), std::string::npos) << r.err;
}

TEST_F(TrainLoopCli, LrScaleRefScalesByTheEffectiveBatch) {
  // batch 2 x accum 3 = 6 against a reference of 4: lr 0.01 -> 0.015 (constant schedule).
  CliResult r =
      run_cli(base("--batch 2 --accum 3 --lr-scale-ref 4 --schedule constant --steps 2 "
                   "--metrics " +
                   test::quoted(dir_ + "/run.jsonl") + " -o " + test::quoted(dir_ + "/m.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto lines = jsonl(dir_ + "/run.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NEAR(lines[1]["lr"].get<double>(), 0.015, 1e-9);
  EXPECT_EQ(lines[1]["tokens"].get<int>(), 2 * 2 * 3 * 16);
}

// Starts `nexus ARGS...` (stderr to /dev/null) and returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args) {
  std::vector<std::string> all = {cli_path()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

TEST_F(TrainLoopCli, SigkillNeverLeavesABadCheckpoint) {
  // A larger model (about 1 MB checkpoints) written every step, killed at random moments; each
  // round resumes from the directory. Every file under a checkpoint name must open and verify.
  const std::string ck = dir_ + "/ck";
  std::mt19937 rng(12345);
  int killed = 0, verified = 0, tmp_left = 0;
  // At least 6 kills, and more rounds (up to 20) until a checkpoint exists on a slow machine.
  for (int round = 0; round < 20 && (round < 6 || verified == 0); ++round) {
    std::vector<std::string> args;
    if (train::list_checkpoints(ck).empty())
      args = {"train",
              "--shape",
              "64,2,4,4,256",
              "--tokenizer",
              tok_,
              "--data",
              dir_ + "/data.bin",
              "--seq",
              "16",
              "--batch",
              "2",
              "--steps",
              "100000",
              "-t",
              "1",
              "--checkpoint-dir",
              ck,
              "--checkpoint-interval",
              "1",
              "--keep-checkpoints",
              "3"};
    else
      args = {"train", "--resume",           ck, "-t",
              "1",     "--checkpoint-dir",   ck, "--checkpoint-interval",
              "1",     "--keep-checkpoints", "3"};
    const pid_t pid = spawn_cli(args);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 250));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status) ? 1 : 0;
    for (const auto& e : fs::directory_iterator(ck))  // a write the kill interrupted
      tmp_left += e.path().filename().string().find(".tmp.") != std::string::npos;
    for (const std::string& path : train::list_checkpoints(ck)) {
      auto c = train::Checkpoint::open(path);
      EXPECT_TRUE(c.is_ok()) << "round " << round << ": " << c.status().message();
      verified += c.is_ok();
    }
  }
  EXPECT_GE(killed, 6);
  EXPECT_GT(verified, 0);
  std::printf(
      "sigkill: %d kills (%d mid-write), %d checkpoint files verified, newest %s\n", killed,
      tmp_left, verified,
      train::list_checkpoints(ck).empty() ? "-" : train::list_checkpoints(ck).back().c_str());
}

TEST_F(TrainLoopCli, FailingWriteKeepsThePreviousCheckpoint) {
  const std::string ck = dir_ + "/ck";
  CliResult r = run_cli(base("--batch 2 --steps 2 --checkpoint-dir " + test::quoted(ck)));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string prev = ck + "/ckpt-00000002.gguf";
  const std::string before = slurp(prev);
  ASSERT_GT(before.size(), 100000u);
  // Resume to step 4 under a 64 KiB file-size limit with SIGXFSZ ignored: reserving the new
  // checkpoint's space fails (EFBIG) before a byte of it is written.
  const std::string err = dir_ + "/err.txt";
  const std::string cmd = "sh -c \"trap '' XFSZ; ulimit -f 64; exec " + test::quoted(cli_path()) +
                          " train --resume " + test::quoted(ck) +
                          " --steps 4 -t 1 --checkpoint-dir " + test::quoted(ck) + "\" 2>" +
                          test::quoted(err);
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string msg = slurp(err);
  EXPECT_NE(msg.find("nexus train: error: cannot reserve"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ckpt-00000004.gguf': File too large"), std::string::npos) << msg;
  EXPECT_EQ(slurp(prev), before);
  EXPECT_TRUE(train::Checkpoint::open(prev).is_ok());
  EXPECT_EQ(train::list_checkpoints(ck).size(), 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(ck), fs::directory_iterator()), 1);  // no temp
}

TEST_F(TrainLoopCli, UsageErrors) {
  struct Case {
    std::string args, message;
    int code;
  };
  const std::vector<Case> cases = {
      {base("--steps 2 --accum 0 -o x.gguf"), "must be > 0", 2},
      {base("--steps 2"), "give -o", 2},
      {base("--steps 2 -o x.gguf --checkpoint-interval 3"), "needs --checkpoint-dir", 2},
      {base("--steps 2 -o x.gguf --eval-interval -1"), "must be >= 0", 2},
      {base("--steps 2 -o x.gguf --keep-checkpoints 0"), "--keep-checkpoints must be >= 1", 2},
      {base("--steps 2 -o x.gguf --optimizer lion"), "unknown optimizer 'lion'", 1},
      {base("--steps 2 -o x.gguf --schedule exp"), "unknown --schedule 'exp'", 1},
      {base("--steps 2 -o x.gguf --precision f8"), "--precision: unknown precision 'f8'", 1},
      {base("--steps 2 -o x.gguf --loss-scale big"), "--loss-scale must be dynamic, none or", 1},
      {base("--steps 2 -o x.gguf --loss-scale -4"), "--loss-scale must be dynamic, none or", 1},
      {base("--steps 2 -o x.gguf --val /nonexistent.bin"), "/nonexistent.bin", 1},
      {"train --resume /nonexistent -o x.gguf", "/nonexistent", 1},
      {"train --resume " + test::quoted(tok_) + " -o x.gguf", "not a nexus training checkpoint", 1},
      {"train --resume " + test::quoted(dir_) + " -o x.gguf", "no checkpoint", 1},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.err.find("nexus train: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace nexus::test
