// End-to-end error handling of `nexus info` and the command dispatcher: bad flags, missing,
// truncated and foreign files give one clear line and a non-zero exit code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_util.h"
#include "nexus/io/gguf.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::run_cli;

// Expects exit code `code` and a single output line that starts with `prefix` and has `message`.
void expect_error(const std::string& args, int code, const std::string& prefix,
                  const std::string& message) {
  const test::CliResult r = run_cli(args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.output;
  EXPECT_EQ(r.output.rfind(prefix, 0), 0u) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(CliErrors, Info) {
  const fs::path dir = fs::temp_directory_path() / ("nexus_cli_errors_" + std::to_string(getpid()));
  fs::create_directories(dir);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<float> v(64);
  w.add_tensor("t", DType::kF32, {8, 8}, v.data());
  const std::vector<uint8_t> img = w.serialize();
  const std::string trunc = (dir / "trunc.gguf").string();
  std::ofstream(trunc, std::ios::binary)
      .write(reinterpret_cast<const char*>(img.data()),
             static_cast<std::streamsize>(img.size() - 9));
  const std::string text = (dir / "text.txt").string();
  std::ofstream(text) << "not a model\n";

  const std::string e = "nexus info: error: ";
  expect_error("info", 2, e, "model is required");
  expect_error("info --bogus " + quoted(trunc), 2, e, "not expected: --bogus");
  expect_error("info /nonexistent/model.gguf", 1, e,
               "cannot open '/nonexistent/model.gguf': No such file or directory");
  expect_error("info " + quoted(dir.string()), 1, e, "is not a regular file");
  const size_t data_at = GgufFile::parse(img, nullptr, "img")->data_offset();
  expect_error("info " + quoted(trunc), 1, e,
               "trunc.gguf: at offset 69: tensor 't' data [" + std::to_string(data_at) +
                   ", +256) runs past the end of the file (" + std::to_string(img.size() - 9) +
                   " bytes)");
  expect_error("info " + quoted(text), 1, e, "text.txt: at offset 0: bad magic (not a GGUF file)");
  fs::remove_all(dir);
}

TEST(CliErrors, Dispatcher) {
  expect_error("frobnicate", 2, "nexus: error: ", "unknown command 'frobnicate'");
  EXPECT_EQ(run_cli("info --help").code, 0);
}

}  // namespace
}  // namespace nexus
