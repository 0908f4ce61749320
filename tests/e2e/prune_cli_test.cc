// End-to-end tests of `nexus prune`: a structured prune of the demo model from a calibration text
// is smaller, runs, and fine-tunes with `train --init`; the same from an imatrix file; one-line
// errors with usage (2) or failure (1) codes, nothing written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "nexus/io/gguf.h"
#include "test_paths.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::run_cli;

const std::string kDemo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
constexpr const char* kText =
    "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the "
    "sun. Arise, fair sun, and kill the envious moon, who is already sick and pale with grief, "
    "that thou her maid art far more fair than she. JULIET: O Romeo, Romeo, wherefore art thou "
    "Romeo? Deny thy father and refuse thy name; or, if thou wilt not, be but sworn my love, and "
    "I'll no longer be a Capulet.";

class PruneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("nexus_prune_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path("calib.txt")) << kText << "\n" << kText << "\n" << kText;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(PruneCli, StructuredFromACalibrationTextIsSmallerRunsAndFineTunes) {
  const std::string out = path("small.gguf");
  auto r = run_cli("prune " + quoted(kDemo) + " " + quoted(out) +
                   " --structured --ffn-keep 0.5 --heads-keep 0.5 -c 32 -f " +
                   quoted(path("calib.txt")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.err.find("FFN 384 -> 192"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("4 -> 2 KV heads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("blk.0.ffn_down.weight"), std::string::npos) << "one line per tensor";
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->get_int("llama.feed_forward_length").value_or(0), 192);
  EXPECT_EQ(g->get_int("llama.attention.head_count").value_or(0), 2);
  EXPECT_EQ(g->get_int("llama.attention.key_length").value_or(0), 32);
  EXPECT_LT(fs::file_size(out), fs::file_size(kDemo) * 3 / 4);
  auto run = run_cli("run -m " + quoted(out) + " -p ROMEO: -n 8 --temp 0");
  EXPECT_EQ(run.code, 0) << run.output;
  // The recovery loop: fine-tune the pruned model on a few steps of text.
  const std::string data = path("d.bin");
  auto tok = run_cli("tokenize-data -i " + quoted(path("calib.txt")) + " -m " + quoted(kDemo) +
                     " -o " + quoted(data));
  ASSERT_EQ(tok.code, 0) << tok.output;
  auto ft = run_cli("train --init " + quoted(out) + " --data " + quoted(data) +
                    " --batch 2 --seq 16 --steps 3 -t 1 -o " + quoted(path("ft.gguf")));
  ASSERT_EQ(ft.code, 0) << ft.output;
  auto f = GgufFile::open(path("ft.gguf"));
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->get_int("llama.feed_forward_length").value_or(0), 192);
}

TEST_F(PruneCli, FromAnImatrixFileAndUnstructured) {
  auto im = run_cli("imatrix -m " + quoted(kDemo) + " -f " + quoted(path("calib.txt")) +
                    " -c 32 -o " + quoted(path("im.gguf")));
  ASSERT_EQ(im.code, 0) << im.output;
  auto r = run_cli("prune -q " + quoted(kDemo) + " " + quoted(path("f.gguf")) +
                   " --structured --ffn-keep 0.25 --imatrix " + quoted(path("im.gguf")));
  ASSERT_EQ(r.code, 0) << r.output;
  auto g = GgufFile::open(path("f.gguf"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->get_int("llama.feed_forward_length").value_or(0), 96);
  auto u = run_cli("prune -q " + quoted(kDemo) + " " + quoted(path("u.gguf")) +
                   " --unstructured 0.5");
  ASSERT_EQ(u.code, 0) << u.output;
  auto run = run_cli("run -m " + quoted(path("u.gguf")) + " -p ROMEO: -n 4 --temp 0");
  EXPECT_EQ(run.code, 0) << run.output;
}

// The final perplexity of `nexus perplexity` output ("Final estimate: PPL = P +/- E"); -1 if none.
double final_ppl(const std::string& out) {
  const size_t at = out.find("PPL = ");
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 6));
}

TEST_F(PruneCli, TwoOfFourRunsCompressedWithTheDenseResult) {
  const std::string out = path("s24.gguf");
  auto r = run_cli("prune -q " + quoted(kDemo) + " " + quoted(out) + " --2:4 -c 32 -f " +
                   quoted(path("calib.txt")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(fs::file_size(out), fs::file_size(kDemo)) << "a dense GGUF, zeros included";
  const std::string ppl =
      "perplexity -m " + quoted(out) + " -f " + quoted(path("calib.txt")) + " -c 32 -t 2";
  auto sparse = run_cli(ppl);
  ASSERT_EQ(sparse.code, 0) << sparse.output;
  setenv("NEXUS_SPARSE24", "0", 1);
  auto dense = run_cli(ppl);
  unsetenv("NEXUS_SPARSE24");
  ASSERT_EQ(dense.code, 0) << dense.output;
  ASSERT_GT(final_ppl(sparse.output), 1.0) << sparse.output;
  EXPECT_NEAR(final_ppl(sparse.output), final_ppl(dense.output), 1e-4 * final_ppl(dense.output));
  auto gen = run_cli("run -m " + quoted(out) + " -p ROMEO: -n 12 --temp 0");
  setenv("NEXUS_SPARSE24", "0", 1);
  auto gen_dense = run_cli("run -m " + quoted(out) + " -p ROMEO: -n 12 --temp 0");
  unsetenv("NEXUS_SPARSE24");
  ASSERT_EQ(gen.code, 0) << gen.output;
  EXPECT_EQ(gen.out, gen_dense.out) << "greedy text, compressed and dense";
}

// The zeros of each blk.* matrix of a GGUF (F32) and how many of its values differ from `ref`'s.
struct ZeroCount {
  int64_t zeros = 0, values = 0, changed = 0;
};
ZeroCount block_zeros(const GgufFile& g, const GgufFile& ref) {
  ZeroCount z;
  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.shape.size() != 2) continue;
    const auto* v = reinterpret_cast<const float*>(t.data);
    const auto* r = reinterpret_cast<const float*>(ref.find_tensor(t.name)->data);
    for (size_t i = 0; i < t.nbytes / sizeof(float); ++i) {
      z.zeros += v[i] == 0.0f;
      z.changed += v[i] != r[i];
      ++z.values;
    }
  }
  return z;
}

// The recovery loop of a 2:4 model: train --init --keep-zeros fine-tunes the kept weights and
// leaves the pruned ones zero (without the flag they come back).
TEST_F(PruneCli, TwoOfFourFineTunesWithItsZerosKept) {
  const std::string pruned = path("s24.gguf"), data = path("d.bin");
  ASSERT_EQ(run_cli("prune -q " + quoted(kDemo) + " " + quoted(pruned) + " --2:4").code, 0);
  auto tok = run_cli("tokenize-data -i " + quoted(path("calib.txt")) + " -m " + quoted(kDemo) +
                     " -o " + quoted(data));
  ASSERT_EQ(tok.code, 0) << tok.output;
  for (bool keep : {true, false}) {
    const std::string out = path(keep ? "kept.gguf" : "lost.gguf");
    auto ft = run_cli("train --init " + quoted(pruned) + " --data " + quoted(data) +
                      " --batch 2 --seq 16 --steps 3 --lr 1e-3 -t 1 -o " + quoted(out) +
                      (keep ? " --keep-zeros" : ""));
    ASSERT_EQ(ft.code, 0) << ft.output;
    auto a = GgufFile::open(pruned);
    auto b = GgufFile::open(out);
    ASSERT_TRUE(a && b);
    const ZeroCount before = block_zeros(*a, *a), after = block_zeros(*b, *a);
    EXPECT_EQ(before.zeros * 2, before.values) << "half of every block matrix is zero";
    if (keep) {
      EXPECT_EQ(after.zeros, before.zeros);
      EXPECT_GT(after.changed, before.values / 4) << "the kept weights were trained";
    } else {
      EXPECT_LT(after.zeros, before.zeros / 10) << "without --keep-zeros the zeros are trained";
    }
  }
}

TEST_F(PruneCli, BadRequestsAreOneLineErrorsAndWriteNothing) {
  const std::string out = path("x.gguf"), calib = quoted(path("calib.txt"));
  struct Case {
    std::string args, needle;
    int code;
  };
  const Case cases[] = {
      {"", "nothing to do", 2},
      {"--ffn-keep 0.5 -f " + calib, "need --structured", 2},
      {"--structured -f " + calib, "below 1", 2},
      {"--structured --ffn-keep 0.5", "-f CALIB.txt or --imatrix", 2},
      {"--structured --ffn-keep 0.5 -f " + calib + " --imatrix " + calib, "not both", 2},
      {"--structured --ffn-keep 1.5 -f " + calib, "(0, 1]", 1},
      {"--unstructured 1", "[0, 1)", 1},
      {"--2:4 --unstructured 0.5", "not both", 2},
      {"--structured --ffn-keep 0.5 --imatrix " + calib, "calib.txt", 1},
  };
  for (const Case& c : cases) {
    auto r = run_cli("prune " + quoted(kDemo) + " " + quoted(out) + " " + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  auto same = run_cli("prune " + quoted(kDemo) + " " + quoted(kDemo) + " --unstructured 0.5");
  EXPECT_EQ(same.code, 2) << same.output;
  auto missing = run_cli("prune " + quoted(path("none.gguf")) + " " + quoted(out) +
                         " --unstructured 0.5");
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.err.find("none.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace nexus
