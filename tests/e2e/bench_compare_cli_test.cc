// End-to-end: `nexus bench --compare` exit codes (0 no regression, 1 worse, 2 bad input), the
// --plot SVGs of bench and compare, and `nexus bench --ladder` on stories260K.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "e2e/cli_util.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;

class BenchCompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nexus_cmp_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a bench JSON file with one tg64 test of the given samples.
  std::string write(const std::string& name, const std::string& samples) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << "[{\"model_filename\":\"m.gguf\",\"model_type\":\"llama 1M F32\","
                           "\"n_prompt\":0,\"n_gen\":64,\"n_threads\":2,\"n_seq\":1,"
                           "\"type_k\":\"f16\",\"test\":\"tg64\",\"avg_ts\":1,\"stddev_ts\":0,"
                           "\"samples_ts\":["
                        << samples << "]}]\n";
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(BenchCompareCli, ExitCodes) {
  const std::string base = write("base.json", "100,101,99,100,100");
  const std::string worse = write("worse.json", "80,81,79,80,80");
  const std::string noisy = write("noisy.json", "93,80,104,90,99");
  const std::string better = write("better.json", "130,131,129,130,130");
  auto r = test::run_cli("bench --compare " + base + " " + worse);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.out.find("worse"), std::string::npos);
  r = test::run_cli("bench --compare " + base + " " + noisy + " --threshold 5%");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find("within noise"), std::string::npos);
  r = test::run_cli("bench --compare " + base + " " + better + " --plot " + path("cmp.svg"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find("better"), std::string::npos);
  const std::string svg = slurp(path("cmp.svg"));
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("baseline"), std::string::npos);
  // A 25 % threshold hides the 20 % drop.
  EXPECT_EQ(test::run_cli("bench --compare " + base + " " + worse + " --threshold 25%").code, 0);
}

TEST_F(BenchCompareCli, BadInputExitsTwo) {
  const std::string base = write("base.json", "100,100,100");
  std::ofstream(path("bad.json")) << "[{\"oops\":";
  std::ofstream(path("other.json"))
      << "[{\"model_type\":\"other\",\"test\":\"tg64\",\"avg_ts\":5,\"n_threads\":2}]";
  for (const std::string& args :
       {"bench --compare " + base + " " + path("missing.json"),
        "bench --compare " + base + " " + path("bad.json"),
        "bench --compare " + base + " " + path("other.json"),
        "bench --compare " + base + " " + base + " --threshold lots", "bench --compare " + base}) {
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
  }
}

TEST_F(BenchCompareCli, BenchPlot) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const auto r = test::run_cli("bench -m " + test::shared_path("models/stories260K.gguf") +
                               " -p 8 -n 4 -t 1 -r 2 --plot " + path("bench.svg"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string svg = slurp(path("bench.svg"));
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 5, true);
  size_t rects = 0;
  for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++rects;
  EXPECT_EQ(rects, 2u);  // pp8 and tg4
  EXPECT_NE(svg.find(">pp8 t=1<"), std::string::npos);
}

TEST_F(BenchCompareCli, Ladder) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const auto r = test::run_cli("bench --ladder -m " + test::shared_path("models/stories260K.gguf") +
                               " -p 8 -n 8 -t 2 -r 1 --plot " + path("ladder.svg"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.out.find("| Base |"), std::string::npos);
  EXPECT_NE(r.out.find("| +Q8_0 KV cache |"), std::string::npos);
  EXPECT_NE(slurp(path("ladder.svg")).find("+flash attention"), std::string::npos);
  EXPECT_EQ(test::run_cli("bench --ladder -m a.gguf -m b.gguf").code, 1);
}

}  // namespace
}  // namespace nexus
