// Runs `nexus tokenize` as a process: ids and pieces for stories260K, -f reading exact bytes, and
// usage errors giving one "nexus tokenize: error: ..." line and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_paths.h"

namespace nexus {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

struct CliRun {
  int code = -1;
  std::string out;
};

// Runs the CLI with `args` (already shell-quoted); `merge_stderr` captures stderr as well.
CliRun run_cli(const std::string& args, bool merge_stderr = false) {
  const std::string cmd =
      "'" + test::cli_path() + "' " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string model_arg() { return "-m '" + test::shared_path(kModel) + "'"; }

TEST(TokenizeCli, IdsAndPiecesForStories260K) {
  NEXUS_REQUIRE_SHARED(kModel);
  CliRun ids = run_cli("tokenize " + model_arg() + " -p 'Once upon a time' --ids");
  EXPECT_EQ(ids.code, 0);
  EXPECT_EQ(ids.out, "1 403 407 261 378\n");
  CliRun no_bos = run_cli("tokenize " + model_arg() + " -p 'Once upon a time' --ids --no-bos");
  EXPECT_EQ(no_bos.out, "403 407 261 378\n");
  CliRun pieces = run_cli("tokenize " + model_arg() + " -p 'Once upon a time'");
  EXPECT_EQ(pieces.code, 0);
  EXPECT_EQ(pieces.out, "1\t<s>\n403\t Once\n407\t upon\n261\t a\n378\t time\n");
  // <s> in the text is BOS unless --no-special.
  EXPECT_EQ(run_cli("tokenize " + model_arg() + " -p '<s>Once' --ids --no-bos").out, "1 403\n");
  EXPECT_NE(run_cli("tokenize " + model_arg() + " -p '<s>Once' --ids --no-bos --no-special").out,
            "1 403\n");
}

TEST(TokenizeCli, FileInputIsReadAsExactBytes) {
  NEXUS_REQUIRE_SHARED(kModel);
  const auto path = std::filesystem::temp_directory_path() /
                    ("nexus_tokenize_e2e_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream f(path, std::ios::binary);
    f << "Once upon a time";
  }
  EXPECT_EQ(run_cli("tokenize " + model_arg() + " -f '" + path.string() + "' --ids").out,
            "1 403 407 261 378\n");
  {
    std::ofstream f(path, std::ios::binary);
    f << "Once\xFF\n";  // an invalid UTF-8 byte and a newline fall back to byte tokens
  }
  CliRun r = run_cli("tokenize " + model_arg() + " -f '" + path.string() + "' --ids --no-bos");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "403 258 13\n");
  std::filesystem::remove(path);
}

TEST(TokenizeCli, UsageErrors) {
  NEXUS_REQUIRE_SHARED(kModel);
  const std::string prefix = "nexus tokenize: error: ";
  CliRun bad_flag = run_cli("tokenize " + model_arg() + " -p x --bogus", true);
  EXPECT_NE(bad_flag.code, 0);
  EXPECT_EQ(bad_flag.out.rfind(prefix, 0), 0u) << bad_flag.out;
  CliRun no_input = run_cli("tokenize " + model_arg(), true);
  EXPECT_NE(no_input.code, 0);
  EXPECT_EQ(no_input.out, prefix + "no input: give -p TEXT or -f FILE\n");
  CliRun both = run_cli("tokenize " + model_arg() + " -p x -f y", true);
  EXPECT_NE(both.code, 0);
  EXPECT_EQ(both.out.rfind(prefix, 0), 0u) << both.out;
  CliRun missing = run_cli("tokenize -m /nonexistent/model.gguf -p x", true);
  EXPECT_NE(missing.code, 0);
  EXPECT_EQ(missing.out.rfind(prefix, 0), 0u) << missing.out;
  EXPECT_NE(missing.out.find("/nonexistent/model.gguf"), std::string::npos);
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1);
}

}  // namespace
}  // namespace nexus
