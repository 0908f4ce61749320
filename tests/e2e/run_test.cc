// `nexus run` end to end: the published stories260K sample, determinism, and bad input.
#include <gtest/gtest.h>

#include "e2e/cli_util.h"

namespace nexus::test {
namespace {

const char* kStoriesSample =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.";

TEST(RunCli, Stories260KGreedyReproducesPublishedSample) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  CliResult r = run_cli("run -m " + shared_path("models/stories260K.gguf") + " -n 70 --temp 0 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(kStoriesSample, 0), 0u) << "output was: " << r.out;
  EXPECT_NE(r.err.find("generated: 70 tokens"), std::string::npos) << r.err;
}

TEST(RunCli, KvCacheTypesAgreeOnGreedyText) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  for (const char* kv : {"f32", "f16", "q8_0"}) {
    CliResult r = run_cli("run -m " + shared_path("models/stories260K.gguf") +
                          " -n 40 --temp 0 --kv-type " + kv);
    ASSERT_EQ(r.code, 0) << kv << ": " << r.err;
    EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u)
        << kv << ": " << r.out;
  }
}

TEST(RunCli, SameSeedSameTextAndPromptIsEchoed) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string cmd = "run -m " + shared_path("models/stories260K.gguf") +
                          " -p 'Tom had a dog' -n 30 --temp 1.0 --seed 7";
  CliResult a = run_cli(cmd), b = run_cli(cmd);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("Tom had a dog", 0), 0u) << a.out;
  CliResult c = run_cli("run -m " + shared_path("models/stories260K.gguf") +
                        " -p 'Tom had a dog' -n 30 --temp 1.0 --seed 8");
  EXPECT_NE(a.out, c.out);
}

TEST(RunCli, StopStringEndsGeneration) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  CliResult r = run_cli("run -m " + shared_path("models/stories260K.gguf") +
                        " -n 100 --temp 0 --stop 'Lily'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named \n");
  EXPECT_NE(r.err.find("stop: stop"), std::string::npos) << r.err;
}

TEST(RunCli, BadInputGivesOneClearErrorAndNonZeroExit) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string m = " -m " + shared_path("models/stories260K.gguf");
  struct Case {
    std::string args;
    std::string needle;
  } cases[] = {
      {"run -m /nonexistent.gguf", "/nonexistent.gguf"},
      {"run" + m + " -n -5", "-n"},
      {"run" + m + " -t 0", "-t"},
      {"run" + m + " --kv-type q4_0", "--kv-type"},
      {"run" + m + " --top-p 1.5", "top_p"},
      {"run" + m + " -c 8 -p 'a prompt that is much longer than eight tokens for sure'",
       "context"},
      {"run" + m + " --bogus-flag", "bogus"},
      {"run" + m + " -f /nonexistent-prompt.txt", "nonexistent-prompt"},
      {"run", "model"},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " -> " << r.err;
  }
}

TEST(RunCli, UnknownCommandFails) {
  CliResult r = run_cli("frobnicate");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
}

}  // namespace
}  // namespace nexus::test
