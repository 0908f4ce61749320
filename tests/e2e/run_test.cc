// `nexus run` end to end: the published stories260K sample, determinism, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

// The same sample from a cache paged in blocks of 16 and 48 positions (prompt batches of 5 tokens
// cross the block boundaries), in one batch and several.
TEST(RunCli, PagedKvCacheReproducesPublishedSample) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  for (const char* args : {" --kv-block 16", " --kv-block 48 -b 5 -p 'Once upon a time'"}) {
    CliResult r = run_cli("run -m " + shared_path("models/stories260K.gguf") +
                          " -n 70 --temp 0 -t 2" + args);
    ASSERT_EQ(r.code, 0) << args << ": " << r.err;
    EXPECT_NE(r.out.find(std::string(kStoriesSample).substr(16)), std::string::npos)
        << args << ": " << r.out;
  }
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

// -n -1, as in llama.cpp: no limit, so generation runs to the end of text or of the context.
TEST(RunCli, NoLimitRunsToTheContextEnd) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  CliResult r =
      run_cli("run -m " + shared_path("models/stories260K.gguf") + " -n -1 -c 48 --temp 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("generated: 48 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stop: context"), std::string::npos) << r.err;
}

TEST(RunCli, BadInputGivesOneClearErrorAndNonZeroExit) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string m = " -m " + shared_path("models/stories260K.gguf");
  struct Case {
    std::string args;
    std::string needle;
  } cases[] = {
      {"run -m /nonexistent.gguf", "/nonexistent.gguf"},
      {"run" + m + " -n -5", "-n must be >= 0, or -1"},
      {"run" + m + " -n -2", "-n must be >= 0, or -1"},
      {"run" + m + " -t 0", "-t"},
      {"run" + m + " --kv-type q4_0", "--kv-type"},
      {"run" + m + " --top-p 1.5", "top_p"},
      {"run" + m + " -c 8 -p 'a prompt that is much longer than eight tokens for sure'", "context"},
      {"run" + m + " --bogus-flag", "bogus"},
      {"run" + m + " -f /nonexistent-prompt.txt", "nonexistent-prompt"},
      {"run" + m + " --device tpu", "--device: unknown device 'tpu'"},
      {"run" + m + " --kv-block -1", "KV block size"},
      // No CUDA kernels yet: the reason is named whatever this machine has (no nvcc at build
      // time, no driver, no device, or a device without kernels).
      {"run" + m + " --device cuda:0", "cuda:0: "},
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

namespace nexus::test {
namespace {

// The llama2.c checkpoint converted by nexus generates exactly the GGUF's greedy text, and a
// Q8_0 conversion of it still begins with the published sample.
TEST(RunCli, ConvertedModelsGenerateTheSameText) {
  NEXUS_REQUIRE_SHARED("models/stories260K.bin");
  NEXUS_REQUIRE_SHARED("models/tok512.bin");
  const std::string dir = ::testing::TempDir() + "nexus_run_convert_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string gguf = dir + "/s.gguf", q8 = dir + "/s-q8_0.gguf";
  CliResult c = run_cli("convert --llama2c " + shared_path("models/stories260K.bin") +
                        " --tokenizer " + shared_path("models/tok512.bin") + " -o " + gguf);
  ASSERT_EQ(c.code, 0) << c.output;
  const std::string args = " -n 120 --temp 0 -t 2";
  CliResult ref = run_cli("run -m " + shared_path("models/stories260K.gguf") + args);
  CliResult conv = run_cli("run -m " + gguf + args);
  ASSERT_EQ(ref.code, 0) << ref.err;
  ASSERT_EQ(conv.code, 0) << conv.err;
  EXPECT_EQ(conv.out, ref.out);

  c = run_cli("convert -i " + gguf + " -o " + q8 + " --type q8_0");
  ASSERT_EQ(c.code, 0) << c.output;
  CliResult q = run_cli("run -m " + q8 + " -n 70 --temp 0");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.out.rfind(kStoriesSample, 0), 0u) << q.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus::test

namespace nexus::test {
namespace {

// The model `make demo` runs ships in the repository and must keep loading and generating.
TEST(RunCli, EmbeddedDemoModelGeneratesDeterministically) {
  const std::string model = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  const std::string cmd = "run -m " + model + " -p 'ROMEO:' -n 40 --temp 0.8 --seed 42";
  CliResult a = run_cli(cmd), b = run_cli(cmd);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("ROMEO:", 0), 0u) << a.out;
  EXPECT_NE(a.err.find("generated: 40 tokens"), std::string::npos) << a.err;
  // Its context is 128 positions: asking for more stops at the context end, cleanly.
  CliResult c = run_cli("run -m " + model + " -p 'ROMEO:' -n 500 --temp 0.8 --seed 1");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("stop: context"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace nexus::test
