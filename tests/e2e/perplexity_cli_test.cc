// `nexus perplexity` end to end on the demo model (models/shakespeare-1m.gguf): the progress and
// the final estimate, one chunk equal to the first chunk of a longer run, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "e2e/cli_util.h"

namespace nexus::test {
namespace {

const std::string kModel = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";

// About 1,500 tokens of verse for the demo model's 1,024-token vocabulary.
std::string text_file() {
  static const std::string path = [] {
    const std::string p = ::testing::TempDir() + "nexus_ppl_" + std::to_string(getpid()) + ".txt";
    std::ofstream out(p);
    for (int i = 0; i < 12; ++i)
      out << "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, "
             "speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n\n"
             "All:\nResolved. resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is "
             "chief enemy to the people.\n\n";
    return p;
  }();
  return path;
}

double final_ppl(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(Final estimate: PPL = ([0-9.]+) \+/- [0-9.]+)")))
    return -1;
  return std::stod(m[1]);
}

TEST(PerplexityCli, PrintsEachChunkAndTheFinalEstimate) {
  CliResult r = run_cli("perplexity -m " + quoted(kModel) + " -f " + quoted(text_file()) +
                        " -c 64 --chunks 4 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* chunk : {"[1]", "[2]", "[3]", "[4]"})
    EXPECT_NE(r.out.find(chunk), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[5]"), std::string::npos) << r.out;
  const double ppl = final_ppl(r.out);
  // A trained model on text of its own domain: far below the vocabulary's 1,024 (uniform).
  EXPECT_GT(ppl, 1.0) << r.out;
  EXPECT_LT(ppl, 100.0) << r.out;
  EXPECT_NE(r.out.find("(124 tokens scored in 4 chunks)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("4 chunks of 64 tokens"), std::string::npos) << r.err;

  // One chunk alone gives the first progress value of the longer run.
  CliResult one = run_cli("perplexity -m " + quoted(kModel) + " -f " + quoted(text_file()) +
                          " -c 64 --chunks 1 -b 16 -t 1");
  ASSERT_EQ(one.code, 0) << one.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(\[1\]([0-9.]+),)"))) << r.out;
  EXPECT_NEAR(final_ppl(one.out), std::stod(m[1]), 2e-4 * std::stod(m[1])) << one.out;
}

// A cache paged in blocks of 16 positions (each 64-token chunk over four blocks, given back and
// taken again from chunk to chunk) scores the text as the contiguous cache does.
TEST(PerplexityCli, PagedKvCacheGivesTheSamePerplexity) {
  const std::string args = "perplexity -m " + quoted(kModel) + " -f " + quoted(text_file()) +
                           " -c 64 --chunks 4 -t 2";
  CliResult plain = run_cli(args);
  CliResult paged = run_cli(args + " --kv-block 16");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(paged.code, 0) << paged.err;
  EXPECT_NEAR(final_ppl(paged.out), final_ppl(plain.out), 1e-4 * final_ppl(plain.out))
      << paged.out;
}

TEST(PerplexityCli, BadInputIsAClearError) {
  const std::string base = "perplexity -m " + quoted(kModel) + " ";
  struct Case {
    std::string args;
    int code;
    std::string part;
  };
  const Case cases[] = {
      {"-f " + quoted(text_file()) + " -c 100000", 1, "fewer than one chunk of 100000"},
      {"-f " + quoted(text_file()) + " --chunks 0", 1, "--chunks must be -1 or >= 1"},
      {"-f " + quoted(text_file()) + " -c 2", 1, "-c must be >= 4"},
      {"-f /nonexistent/text.txt", 1, "/nonexistent/text.txt"},
      {"-f " + quoted(text_file()) + " --kv-type q4_0", 1, "--kv-type must be"},
      {"", 2, "--file is required"},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli(base + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.err.find("nexus perplexity: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.part), std::string::npos) << c.args << ": " << r.err;
  }
  CliResult missing = run_cli("perplexity -m /nonexistent/model.gguf -f " + quoted(text_file()));
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace nexus::test
