// `mpirun -np 2 nexus train` end to end, over shared memory and over TCP on the loopback: two
// ranks with half the batch each train the model one process trains on the whole batch (the
// losses step for step, the parameters within f32 summation-order rounding); ZeRO 1 and 2 give
// the bits of ZeRO 0; bf16 gradients stay close; checkpoints resume on another number of ranks; a
// killed rank ends the job with an error and leaves the last checkpoint whole; bad flags are
// one-line errors. Tensor parallel (--tp 2): training gives the one-process losses and model and
// its checkpoints resume with or without --tp; run and bench give the one-process tokens.
// Pipeline parallel (--pp 2 and 4, 1F1B): the losses and model of one process accumulating the
// same micro-batches, checkpoints that resume with or without --pp.
// Skips where this build has no MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "e2e/cli_util.h"
#include "nexus/dist/communicator.h"
#include "nexus/io/gguf.h"
#include "nexus/train/checkpoint.h"
#include "test_paths.h"

namespace nexus::test {
namespace {

namespace fs = std::filesystem;

const std::string kDemo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";

// Largest |a - b| over every tensor of two F32 models of one shape, and the largest |a|.
std::pair<double, double> max_diff(const std::string& a, const std::string& b) {
  auto fa = GgufFile::open(a), fb = GgufFile::open(b);
  EXPECT_TRUE(fa && fb);
  double diff = 0, mag = 0;
  if (!fa || !fb) return {1e30, 0};
  for (const GgufTensorInfo& t : fa.value().tensors()) {
    const GgufTensorInfo* u = fb.value().find_tensor(t.name);
    EXPECT_TRUE(u != nullptr && u->nbytes == t.nbytes && t.dtype == DType::kF32) << t.name;
    if (u == nullptr || u->nbytes != t.nbytes) return {1e30, 0};
    const auto* x = reinterpret_cast<const float*>(t.data);
    const auto* y = reinterpret_cast<const float*>(u->data);
    for (size_t i = 0; i < t.nbytes / 4; ++i) {
      diff = std::max(diff, std::fabs(double(x[i]) - y[i]));
      mag = std::max(mag, std::fabs(double(x[i])));
    }
  }
  return {diff, mag};
}

bool same_bytes(const std::string& a, const std::string& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(fa), {}) ==
         std::string(std::istreambuf_iterator<char>(fb), {});
}

class TrainDistCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dist::mpi_built()) GTEST_SKIP() << "this nexus was built without MPI (make deps)";
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "no mpirun on PATH (make deps installs openmpi-bin)";
    // Open MPI refuses root without these; CMA single copies need ptrace rights containers lack.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    // A session directory of this test's own: two mpiruns starting at once under ctest -j race to
    // create the shared default one ("File exists"). Short, for the sockets inside it.
    ompi_dir_ = fs::path("/tmp") / ("nx-ompi-" + std::to_string(::getpid()));
    fs::create_directories(ompi_dir_);
    setenv("OMPI_MCA_orte_tmpdir_base", ompi_dir_.c_str(), 1);
    dir_ = fs::path(::testing::TempDir()) /
           ("nexus_dist_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream f(path("text.txt"));
    for (int i = 0; i < 40; ++i)
      f << "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet "
           "is the sun. JULIET: O Romeo, Romeo, wherefore art thou Romeo? "
        << i << "\n";
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
    if (!ompi_dir_.empty()) fs::remove_all(ompi_dir_);
  }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  // The run's flags but the batch, which each test sets per rank.
  std::string common(int steps = 8) const {
    return " --shape 32,2,2,2,64 --tokenizer " + quoted(kDemo) + " --data " +
           quoted(path("text.txt")) + " --seq 32 --steps " + std::to_string(steps) +
           " --lr 1e-2 --seed 5 --prefetch 1";
  }
  static std::string mpirun(int np, bool tcp = false) {
    std::string m = "mpirun -np " + std::to_string(np) + " --oversubscribe --bind-to none";
    if (tcp) m += " --mca btl tcp,self --mca btl_tcp_if_include lo";
    return m + " '" + cli_path() + "' ";
  }
  fs::path dir_, ompi_dir_;
};

TEST_F(TrainDistCli, TwoRanksTrainTheModelOneProcessTrainsOnTheWholeBatch) {
  auto one = run_cli("train" + common() + " --batch 4 -t 1 -o " + quoted(path("one.gguf")));
  ASSERT_EQ(one.code, 0) << one.output;
  auto shm = run_command(mpirun(2) + "train" + common() + " --batch 2 -t 1 -o " +
                         quoted(path("shm.gguf")));
  ASSERT_EQ(shm.code, 0) << shm.output;
  EXPECT_NE(shm.err.find("data parallel over 2 ranks (mpi, shared memory), ZeRO 0"),
            std::string::npos)
      << shm.err;
  // Progress once, from rank 0.
  const auto l1 = step_losses(one.err), l2 = step_losses(shm.err);
  ASSERT_EQ(l1.size(), 8u) << one.err;
  ASSERT_EQ(l2.size(), 8u) << shm.err;
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l2[i], 2e-4) << "step " << i + 1;
  const auto [d, mag] = max_diff(path("one.gguf"), path("shm.gguf"));
  EXPECT_LT(d, 1e-5 * std::max(1.0, mag)) << "largest parameter " << mag;

  // ZeRO 1 over TCP: the same updates, bit for bit, from sharded optimizer state.
  auto tcp = run_command(mpirun(2, true) + "train" + common() + " --batch 2 -t 1 --zero 1 -o " +
                         quoted(path("tcp.gguf")));
  ASSERT_EQ(tcp.code, 0) << tcp.output;
  EXPECT_NE(tcp.err.find("(mpi, tcp), ZeRO 1"), std::string::npos) << tcp.err;
  EXPECT_NE(tcp.err.find("optimizer state"), std::string::npos) << tcp.err;
  EXPECT_TRUE(same_bytes(path("shm.gguf"), path("tcp.gguf")));
  // ZeRO 2 (gradients reduce-scattered block by block): the same bits again.
  auto z2 = run_command(mpirun(2) + "train" + common() + " --batch 2 -t 1 --zero 2 -o " +
                        quoted(path("z2.gguf")));
  ASSERT_EQ(z2.code, 0) << z2.output;
  EXPECT_TRUE(same_bytes(path("shm.gguf"), path("z2.gguf")));
  // With two micro-batches a step, ZeRO 2 sums each rank's shard over them after the exchange
  // (ZeRO 0 before it): another rounding order, the same training.
  auto a0 = run_command(mpirun(2) + "train" + common() + " --batch 1 --accum 2 -t 1 -o " +
                        quoted(path("a0.gguf")));
  auto a2 = run_command(mpirun(2) + "train" + common() + " --batch 1 --accum 2 -t 1 --zero 2 -o " +
                        quoted(path("a2.gguf")));
  ASSERT_EQ(a0.code, 0) << a0.output;
  ASSERT_EQ(a2.code, 0) << a2.output;
  const auto [da, ma] = max_diff(path("a0.gguf"), path("a2.gguf"));
  EXPECT_LT(da, 1e-5 * std::max(1.0, ma));

  // bf16 gradients on the wire: another run, close to the f32 one.
  auto bf = run_command(mpirun(2) + "train" + common() + " --batch 2 -t 1 --comm-dtype bf16 -o " +
                        quoted(path("bf.gguf")));
  ASSERT_EQ(bf.code, 0) << bf.output;
  const auto lb = step_losses(bf.err);
  ASSERT_EQ(lb.size(), 8u);
  for (size_t i = 0; i < lb.size(); ++i) EXPECT_NEAR(lb[i], l2[i], 0.05) << "step " << i + 1;
  EXPECT_FALSE(same_bytes(path("shm.gguf"), path("bf.gguf")));
}

TEST_F(TrainDistCli, CheckpointsResumeOnAnotherNumberOfRanks) {
  // Stopped at step 4 on two ranks (ZeRO 1: the shards' optimizer state gathered into the
  // checkpoint) and finished on one; stopped at step 4 on one and finished on two (ZeRO 2: the
  // checkpoint's state cut into shards).
  auto a = run_command(mpirun(2) + "train" + common(4) + " --batch 2 -t 1 --zero 1 " +
                       "--checkpoint-dir " + quoted(path("ck2")));
  ASSERT_EQ(a.code, 0) << a.output;
  auto a2 = run_cli("train --resume " + quoted(path("ck2")) + " --steps 8 -t 1 -o " +
                    quoted(path("a.gguf")));
  ASSERT_EQ(a2.code, 0) << a2.output;
  auto b = run_cli("train" + common(4) + " --batch 4 -t 1 --checkpoint-dir " + quoted(path("ck1")));
  ASSERT_EQ(b.code, 0) << b.output;
  auto b2 = run_command(mpirun(2) + "train --resume " + quoted(path("ck1")) +
                        " --steps 8 -t 1 --zero 2 -o " + quoted(path("b.gguf")));
  ASSERT_EQ(b2.code, 0) << b2.output;
  // The same data and optimizer state, on 1 or 2 ranks.
  const auto [d, mag] = max_diff(path("a.gguf"), path("b.gguf"));
  EXPECT_LT(d, 1e-5 * std::max(1.0, mag));
  EXPECT_EQ(step_losses(a2.err).size(), 4u) << a2.err;
  // A global batch that does not split: 3 sequences over 2 ranks.
  auto c = run_cli("train" + common(2) + " --batch 3 -t 1 --checkpoint-dir " + quoted(path("ck3")));
  ASSERT_EQ(c.code, 0) << c.output;
  auto c2 = run_command(mpirun(2) + "train --resume " + quoted(path("ck3")) +
                        " --steps 4 -t 1 -o " + quoted(path("c.gguf")));
  EXPECT_NE(c2.code, 0);
  EXPECT_NE(c2.err.find("does not split over 2 ranks"), std::string::npos) << c2.err;
}

TEST_F(TrainDistCli, AKilledRankEndsTheJobAndLeavesTheLastCheckpointWhole) {
  const std::string ck = path("ck");
  const std::string log = path("job.log");
  const std::string cmd = mpirun(2) + "train" + common(100000) + " --batch 2 -t 1 " +
                          "--checkpoint-dir " + quoted(ck) + " --checkpoint-interval 3 > " +
                          quoted(log) + " 2>&1; echo $? > " + quoted(path("rc"));
  std::thread job([&] { std::system(cmd.c_str()); });
  // Wait for a checkpoint, then kill one rank (a child of mpirun) with SIGKILL.
  bool killed = false;
  for (int i = 0; i < 600 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (train::list_checkpoints(ck).empty()) continue;
    // The ranks are mpirun's children.
    auto launcher = run_command("pgrep -f -- " + quoted("^mpirun .*checkpoint-dir " + ck));
    const int mpirun_pid = std::atoi(launcher.out.c_str());
    if (mpirun_pid <= 0) continue;
    auto ranks = run_command("pgrep -P " + std::to_string(mpirun_pid));
    std::vector<int> pids;
    std::istringstream in(ranks.out);
    for (int p; in >> p;) pids.push_back(p);
    if (pids.size() == 2) killed = ::kill(pids.back(), SIGKILL) == 0;
  }
  job.join();
  ASSERT_TRUE(killed) << "no checkpoint or no ranks to kill";
  std::ifstream rc_in(path("rc"));
  int rc = -1;
  rc_in >> rc;
  std::ifstream log_in(log);
  const std::string out((std::istreambuf_iterator<char>(log_in)), {});
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("signal 9"), std::string::npos) << out;
  // The newest checkpoint opens (checksums verified) and resumes.
  auto latest = train::latest_checkpoint(ck);
  ASSERT_TRUE(latest) << latest.status().message();
  auto opened = train::Checkpoint::open(latest.value());
  ASSERT_TRUE(opened) << opened.status().message();
  const int64_t step = opened.value().progress().step;
  auto resumed = run_cli("train --resume " + quoted(ck) + " --steps " + std::to_string(step + 2) +
                         " -t 1 -o " + quoted(path("r.gguf")));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
}

TEST_F(TrainDistCli, BadFlagsAreOneLineErrors) {
  for (const char* bad : {" --zero 3", " --comm-dtype fp8", " --bucket-mb 0"}) {
    auto r = run_cli("train" + common(2) + " --batch 2 -o " + quoted(path("x.gguf")) + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
  }
  auto ib = run_command(mpirun(2) + "train" + common(2) +
                        " --batch 2 --optimizer-in-backward --clip 0 -o " + quoted(path("y.gguf")));
  EXPECT_NE(ib.code, 0);
  EXPECT_NE(ib.err.find("--optimizer-in-backward"), std::string::npos) << ib.err;
}

TEST_F(TrainDistCli, TensorParallelTrainsTheModelOneProcessTrains) {
  const std::string flags = common(6) + " --batch 4 -t 1";
  auto one = run_cli("train" + flags + " -o " + quoted(path("one.gguf")));
  ASSERT_EQ(one.code, 0) << one.output;
  const std::string ck = path("ck");
  auto tp = run_command(mpirun(2) + "train" + flags + " --tp 2 -o " + quoted(path("tp.gguf")) +
                        " --checkpoint-dir " + quoted(ck) +
                        " --checkpoint-interval 3 --keep-checkpoints 2");
  ASSERT_EQ(tp.code, 0) << tp.output;
  EXPECT_NE(tp.err.find("tensor parallel over 2 ranks (mpi, shared memory)"), std::string::npos)
      << tp.err;
  const auto l1 = step_losses(one.err), l2 = step_losses(tp.err);
  ASSERT_EQ(l1.size(), 6u) << one.err;
  ASSERT_EQ(l2.size(), 6u) << tp.err;
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l2[i], 2e-4) << "step " << i + 1;
  // The export gathers the slices into the one-process model.
  const auto [d, mag] = max_diff(path("one.gguf"), path("tp.gguf"));
  EXPECT_LT(d, 1e-5 * std::max(1.0, mag)) << "largest parameter " << mag;

  // The step-3 checkpoint holds the whole model and optimizer: it resumes in one process, and
  // under --tp 2 over TCP (cut again), to the same model.
  const std::string ck3 = train::checkpoint_path(ck, 3);
  auto r1 = run_cli("train --resume " + quoted(ck3) + " -t 1 -o " + quoted(path("r1.gguf")));
  ASSERT_EQ(r1.code, 0) << r1.output;
  const auto [d1, mag1] = max_diff(path("one.gguf"), path("r1.gguf"));
  EXPECT_LT(d1, 1e-5 * std::max(1.0, mag1));
  auto r2 = run_command(mpirun(2, true) + "train --resume " + quoted(ck3) + " -t 1 --tp 2 -o " +
                        quoted(path("r2.gguf")));
  ASSERT_EQ(r2.code, 0) << r2.output;
  EXPECT_NE(r2.err.find("(mpi, tcp)"), std::string::npos) << r2.err;
  const auto [d2, mag2] = max_diff(path("one.gguf"), path("r2.gguf"));
  EXPECT_LT(d2, 1e-5 * std::max(1.0, mag2));
}

TEST_F(TrainDistCli, TensorParallelRunAndBenchGiveTheOneProcessTokens) {
  for (const std::string sampling : {" --temp 0", " --temp 0.8 --seed 3"}) {
    const std::string args = "run -m " + quoted(kDemo) + " -p 'ROMEO:' -n 32 -t 1" + sampling;
    auto one = run_cli(args);
    ASSERT_EQ(one.code, 0) << one.output;
    auto tp = run_command(mpirun(2) + args + " --tp 2");
    ASSERT_EQ(tp.code, 0) << tp.output;
    EXPECT_EQ(tp.out, one.out) << sampling;  // printed once, by rank 0
    EXPECT_NE(tp.err.find("tensor parallel over 2 ranks"), std::string::npos) << tp.err;
  }
  auto bench =
      run_command(mpirun(2) + "bench -m " + quoted(kDemo) + " -p 16 -n 8 -r 1 -t 1 -o csv --tp 2");
  ASSERT_EQ(bench.code, 0) << bench.output;
  EXPECT_NE(bench.out.find("tp2"), std::string::npos) << bench.out;
}

TEST_F(TrainDistCli, PipelineParallelTrainsTheModelOneProcessAccumulates) {
  // Four blocks, a tied token table (on the first and the last stage).
  const std::string flags = " --shape 32,4,2,2,64 --tokenizer " + quoted(kDemo) + " --data " +
                            quoted(path("text.txt")) +
                            " --seq 32 --steps 6 --lr 1e-2 --seed 5 --prefetch 1 --batch 2 -t 1";
  auto one = run_cli("train" + flags + " --accum 4 -o " + quoted(path("one.gguf")));
  ASSERT_EQ(one.code, 0) << one.output;
  const std::string ck = path("ck");
  auto pp = run_command(mpirun(2) + "train" + flags + " --pp 2 --micro-batches 4 -o " +
                        quoted(path("pp.gguf")) + " --checkpoint-dir " + quoted(ck) +
                        " --checkpoint-interval 3 --keep-checkpoints 2");
  ASSERT_EQ(pp.code, 0) << pp.output;
  EXPECT_NE(pp.err.find("pipeline parallel over 2 stages (mpi, shared memory), 1F1B over 4"),
            std::string::npos)
      << pp.err;
  auto pp4 = run_command(mpirun(4, true) + "train" + flags + " --pp 4 --micro-batches 4 -o " +
                         quoted(path("pp4.gguf")));
  ASSERT_EQ(pp4.code, 0) << pp4.output;
  const auto l1 = step_losses(one.err);
  ASSERT_EQ(l1.size(), 6u) << one.err;
  for (const auto* run : {&pp, &pp4}) {
    const auto l2 = step_losses(run->err);
    ASSERT_EQ(l2.size(), 6u) << run->err;
    for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l2[i], 2e-4) << "step " << i + 1;
  }
  for (const char* out : {"pp.gguf", "pp4.gguf"}) {
    const auto [d, mag] = max_diff(path("one.gguf"), path(out));
    EXPECT_LT(d, 1e-5 * std::max(1.0, mag)) << out;
  }
  // The step-3 checkpoint (the whole model) resumes in one process and under --pp 2.
  const std::string ck3 = train::checkpoint_path(ck, 3);
  auto r1 = run_cli("train --resume " + quoted(ck3) + " -t 1 -o " + quoted(path("r1.gguf")));
  ASSERT_EQ(r1.code, 0) << r1.output;
  auto r2 = run_command(mpirun(2) + "train --resume " + quoted(ck3) + " -t 1 --pp 2 -o " +
                        quoted(path("r2.gguf")));
  ASSERT_EQ(r2.code, 0) << r2.output;
  for (const char* out : {"r1.gguf", "r2.gguf"}) {
    const auto [d, mag] = max_diff(path("one.gguf"), path(out));
    EXPECT_LT(d, 1e-5 * std::max(1.0, mag)) << out;
  }
}

TEST_F(TrainDistCli, TensorParallelFlagsAreCheckedWithTheirReasons) {
  auto alone = run_cli("run -m " + quoted(kDemo) + " -n 4 --tp 2");
  EXPECT_EQ(alone.code, 2) << alone.output;
  EXPECT_NE(alone.err.find("--tp 2 needs exactly 2 ranks (mpirun -np 2)"), std::string::npos)
      << alone.err;
  auto no_tp = run_command(mpirun(2) + "run -m " + quoted(kDemo) + " -n 4");
  EXPECT_NE(no_tp.code, 0);
  EXPECT_NE(no_tp.err.find("give --tp 2"), std::string::npos) << no_tp.err;
  auto zero = run_command(mpirun(2) + "train" + common(2) + " --batch 2 --tp 2 --zero 1 -o " +
                          quoted(path("z.gguf")));
  EXPECT_NE(zero.code, 0);
  EXPECT_NE(zero.err.find("--tp: tensor parallel uses every rank"), std::string::npos) << zero.err;
  const std::string one_head = " --shape 32,2,1,1,64 --tokenizer " + quoted(kDemo) + " --data " +
                               quoted(path("text.txt")) + " --seq 32 --steps 2 --batch 2";
  auto heads = run_command(mpirun(2) + "train" + one_head + " --tp 2 -o " + quoted(path("h.gguf")));
  EXPECT_NE(heads.code, 0);
  EXPECT_NE(heads.err.find("the attention heads (1) is not a multiple of 2"), std::string::npos)
      << heads.err;
  auto stages = run_command(mpirun(4) + "train" + common(2) + " --batch 2 --pp 4 -o " +
                            quoted(path("s.gguf")));  // two blocks
  EXPECT_NE(stages.code, 0);
  EXPECT_NE(stages.err.find("over 4 stages needs 4 blocks or more; the model has 2"),
            std::string::npos)
      << stages.err;
  auto micro =
      run_cli("train" + common(2) + " --batch 2 --micro-batches 4 -o " + quoted(path("m.gguf")));
  EXPECT_EQ(micro.code, 2) << micro.output;
  EXPECT_NE(micro.err.find("--micro-batches goes with --pp"), std::string::npos) << micro.err;
}

}  // namespace
}  // namespace nexus::test
