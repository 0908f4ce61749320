// Runs the nexus CLI as a child process and captures stdout, stderr and the exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace nexus::test {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
  std::string output;  // out followed by err
};

// A shell command line (quote its words yourself), its stderr captured apart.
inline CliResult run_command(const std::string& command) {
  static int counter = 0;
  const std::string err_path = ::testing::TempDir() + "nexus_cli_err_" +
                               std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string cmd = command + " 2>" + err_path;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path, std::ios::binary);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  r.output = r.out + r.err;
  return r;
}

// `args` is appended to the binary path as-is (quote it yourself).
inline CliResult run_cli(const std::string& args) {
  return run_command("'" + cli_path() + "' " + args);
}

// Single-quotes `s` for the shell.
inline std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// The losses of `nexus train`'s progress lines ("step 3/8  loss 5.4321 ..."), in order.
inline std::vector<double> step_losses(const std::string& err) {
  std::vector<double> losses;
  const std::regex re(R"(step \d+/\d+  loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

}  // namespace nexus::test
