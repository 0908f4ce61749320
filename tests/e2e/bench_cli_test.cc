// End-to-end: `nexus gen-model` + `nexus bench` as processes (JSON fields, token counts, output
// formats, error exits), bench/compare.sh against a fake llama-bench, and bench/train_compare.py
// against a fake `nexus train` and a fake PyTorch peer.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;

struct Proc {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command line, capturing stdout and stderr.
Proc sh(const std::string& cmd, const std::string& err_file) {
  Proc r;
  FILE* p = popen((cmd + " 2>" + err_file).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_file);
  return r;
}

// One tiny model generated once for every test in this file.
class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("nexus_bench_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    const Proc r =
        cli("gen-model --shape custom:dim=64,layers=2,heads=4,kv_heads=2,ffn=96,"
            "vocab=300 --type f32 --seed 7 -o " +
            model_);
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_NE(r.out.find("wrote"), std::string::npos);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static Proc cli(const std::string& args) {
    return sh(test::cli_path() + " " + args, (dir_ / "stderr.txt").string());
  }

  static inline fs::path dir_;
  static inline std::string model_;
};

TEST_F(BenchCli, JsonHasLlamaBenchFieldsAndMatchesFlags) {
  const Proc r = cli("bench -m " + model_ + " -p 8 -n 4 -b 1,2 -t 1 -r 2 -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);  // pp8, tg4, tg4 x2
  for (const auto& t : j) {
    for (const char* f :
         {"build_commit",   "cpu_info",      "model_filename", "model_type", "model_size",
          "model_n_params", "n_threads",     "n_batch",        "n_ubatch",   "type_k",
          "type_v",         "n_prompt",      "n_gen",          "test_time",  "avg_ns",
          "stddev_ns",      "avg_ts",        "stddev_ts",      "samples_ns", "samples_ts",
          "n_seq",          "peak_rss_bytes"})
      EXPECT_TRUE(t.contains(f)) << f;
    EXPECT_EQ(t["model_filename"], model_);
    EXPECT_EQ(t["n_threads"], 1);
    EXPECT_EQ(t["samples_ts"].size(), 2u);
    EXPECT_EQ(t["samples_ns"].size(), 2u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0);
    EXPECT_GE(t["stddev_ts"].get<double>(), 0);
    EXPECT_FALSE(t["build_commit"].get<std::string>().empty());
  }
  EXPECT_EQ(j[0]["n_prompt"], 8);
  EXPECT_EQ(j[0]["n_gen"], 0);
  EXPECT_EQ(j[1]["n_prompt"], 0);
  EXPECT_EQ(j[1]["n_gen"], 4);
  EXPECT_EQ(j[1]["n_seq"], 1);
  EXPECT_EQ(j[2]["n_gen"], 4);
  EXPECT_EQ(j[2]["n_seq"], 2);
  EXPECT_GT(j[2]["bytes_per_token"].get<double>(), 0);
  EXPECT_EQ(j[0]["model_type"], "llama 81K F32");
}

TEST_F(BenchCli, MarkdownAndCsv) {
  Proc r = cli("bench -m " + model_ + " -p 8 -n 2 -t 1 -r 1 --bandwidth 5");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("| model"), std::string::npos);
  EXPECT_NE(r.out.find("| pp8"), std::string::npos);
  EXPECT_NE(r.out.find("| tg2"), std::string::npos);
  EXPECT_NE(r.out.find("of bound"), std::string::npos);
  r = cli("bench -m " + model_ + "," + model_ + " -p 8 -n 0 -t 1 -r 1 -o csv --progress");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);  // header + one pp row per model
  EXPECT_NE(r.err.find("warm-up"), std::string::npos);
}

TEST_F(BenchCli, BadFlagsFailWithAClearError) {
  const std::string m = " -m " + model_ + " -r 1 -n 1 -p 0";
  for (const std::string& args : std::vector<std::string>{
           "bench -p abc" + m, "bench -t 0" + m, "bench -b 0" + m, "bench -r 0 -m " + model_,
           "bench -o xml" + m, "bench --kv-type q4_0" + m, "bench -m /nonexistent/x.gguf",
           "bench -p 0 -n 0 -m " + model_, "bench", "bench --frobnicate" + m, "bench -d -5" + m,
           "bench -d x" + m}) {
    const Proc r = cli(args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find("nexus bench: error:"), std::string::npos) << args << ": " << r.err;
  }
}

TEST_F(BenchCli, GenModelBadFlags) {
  const std::string out = " -o " + (dir_ / "x.gguf").string();
  for (const std::string& args : std::vector<std::string>{
           "gen-model --shape L7B --type f32" + out, "gen-model --shape L15M --type q3_k" + out,
           "gen-model --shape custom:dim=x --type f32" + out, "gen-model --type f32" + out,
           "gen-model --shape L15M --type f32 -o /nonexistent/dir/x.gguf"}) {
    const Proc r = cli(args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find("nexus gen-model: error:"), std::string::npos) << args << ": " << r.err;
  }
  // A shape no disk holds (dim 1e8: 12.8 TB of embeddings alone) is refused before any byte is
  // written (it used to fill the disk with its temporary file), and nothing is left behind.
  const Proc r = cli("gen-model --shape custom:dim=100000000,layers=2 --type f32" + out);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("not enough disk space for '" + (dir_ / "x.gguf").string() + "'"),
            std::string::npos)
      << r.err;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(BenchCli, CompareScriptAgainstFakeLlamaBench) {
  if (std::system("command -v bash >/dev/null && command -v python3 >/dev/null") != 0)
    GTEST_SKIP() << "needs bash and python3";
  const std::string src = NEXUS_SOURCE_DIR;
  const Proc r = sh("NEXUS_BIN=" + test::cli_path() + " bash " + src + "/bench/compare.sh " + src +
                        "/tests/e2e/fake_llama_bench.sh " + model_ +
                        " -p 8 -n 4 -d 0,16 -t 1 -r 1 --out " + (dir_ / "cmp").string(),
                    (dir_ / "cmp_err.txt").string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("| model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nexus t/s"), std::string::npos);
  EXPECT_NE(r.out.find("llama.cpp t/s"), std::string::npos);
  // One row per test, each with the peer's fixed throughput and a ratio.
  EXPECT_NE(r.out.find("| pp8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("200.00 ± 0.50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("20.00 ± 0.50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fake000"), std::string::npos);
  // -d 16: both tools ran the tests again after 16 tokens of context, matched by depth.
  EXPECT_NE(r.out.find("| pp8 @ d16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 @ d16"), std::string::npos) << r.out;
  // The runs alternate: nexus, peer, nexus, peer.
  const std::string log = r.err;
  const size_t a = log.find("p=8 n=0 d=0: nexus"), b = log.find("p=8 n=0 d=0: llama-bench"),
               c = log.find("p=0 n=4 d=0: nexus"), d = log.find("p=0 n=4 d=0: llama-bench"),
               e = log.find("p=0 n=4 d=16: nexus"), f = log.find("p=0 n=4 d=16: llama-bench");
  ASSERT_NE(f, std::string::npos) << log;
  EXPECT_TRUE(a < b && b < c && c < d && d < e && e < f) << log;
  // A missing peer binary is an error.
  const Proc bad = sh("NEXUS_BIN=" + test::cli_path() + " bash " + src +
                          "/bench/compare.sh /nonexistent/llama-bench " + model_,
                      (dir_ / "cmp_err2.txt").string());
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("compare.sh: error:"), std::string::npos);
}

// --membw: the bandwidth is read before the first test and after each one (the fake reads 10, 20,
// 30, ... GB/s), and each row's bound uses the mean of the two readings around its test.
TEST_F(BenchCli, CompareScriptMeasuresBandwidthAroundEachTest) {
  if (std::system("command -v bash >/dev/null && command -v python3 >/dev/null") != 0)
    GTEST_SKIP() << "needs bash and python3";
  const std::string src = NEXUS_SOURCE_DIR;
  const Proc r =
      sh("FAKE_MEMBW_STATE=" + (dir_ / "membw_state").string() + " NEXUS_BIN=" + test::cli_path() +
             " bash " + src + "/bench/compare.sh " + src + "/tests/e2e/fake_llama_bench.sh " +
             model_ + " -p 0 -n 4 -d 0,16 -t 1 -r 1 --membw " + src +
             "/tests/e2e/fake_membw.sh --out " + (dir_ / "cmpbw").string(),
         (dir_ / "cmpbw_err.txt").string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("read GB/s"), std::string::npos) << r.out;
  // Readings 10, 20, 30: tg4 between the first two (15), tg4 @ d16 between the last two (25).
  const size_t d0 = r.out.find("| tg4  "), d16 = r.out.find("| tg4 @ d16");
  ASSERT_NE(d0, std::string::npos) << r.out;
  ASSERT_NE(d16, std::string::npos) << r.out;
  const std::string row0 = r.out.substr(d0, r.out.find('\n', d0) - d0);
  const std::string row16 = r.out.substr(d16, r.out.find('\n', d16) - d16);
  EXPECT_NE(row0.find(" 15.0 |"), std::string::npos) << row0;
  EXPECT_NE(row16.find(" 25.0 |"), std::string::npos) << row16;
  EXPECT_NE(row0.find("%"), std::string::npos) << row0;  // a bound and fractions
  // A --membw that is not an executable is an error before anything runs.
  const Proc bad =
      sh("NEXUS_BIN=" + test::cli_path() + " bash " + src + "/bench/compare.sh " + src +
             "/tests/e2e/fake_llama_bench.sh " + model_ + " --membw /nonexistent/nexus_membw",
         (dir_ / "cmpbw_err2.txt").string());
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--membw"), std::string::npos) << bad.err;
}

// bench/train_compare.py: nexus's tokens/s from the median of steps 2..N in its metrics (the fake
// writes 0.5 s steps: 2048 / 0.5 = 4096 for L15M's batch), the peer's from its own JSON (2048),
// one row per round; a failing nexus stops the run with its log's end and exit 1.
TEST_F(BenchCli, TrainCompareScriptMergesBothEngines) {
  if (std::system("command -v bash >/dev/null && command -v python3 >/dev/null") != 0)
    GTEST_SKIP() << "needs bash and python3";
  const std::string src = NEXUS_SOURCE_DIR;
  const fs::path root = dir_ / "train_compare";
  fs::create_directories(root / "shared" / "data");
  fs::create_directories(root / "torch");
  fs::create_directories(root / "blas");
  std::ofstream(root / "shared" / "data" / "tinyshakespeare.txt") << "text\n";
  std::ofstream(root / "torch" / "bench_train.py") << "# the fake python ignores it\n";
  const std::string cmd = "python3 " + src + "/bench/train_compare.py -r 2 --nexus " + src +
                          "/tests/e2e/fake_nexus_train.sh --torch-python " + src +
                          "/tests/e2e/fake_torch_python.sh --shared " + (root / "shared").string() +
                          " --torch-dir " + (root / "torch").string() + " --blas-dir " +
                          (root / "blas").string() + " --out " + (root / "out").string();
  const Proc r = sh(cmd, (dir_ / "tc_err.txt").string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | 4,096 | 2,048 | 2.00x |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 2 | 4,096 | 2,048 | 2.00x |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ratio: median 2.00x"), std::string::npos) << r.out;
  const Proc bad = sh("FAKE_TRAIN_FAIL=1 " + cmd, (dir_ / "tc_err2.txt").string());
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("nexus train failed (exit 3)"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("failing on purpose"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace nexus
