// Runs the `nexus` CLI as a child process for end-to-end tests: exit code and combined output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "test_paths.h"

namespace nexus::test {

struct CliResult {
  int code = -1;       // exit status (-1 if the process did not exit normally)
  std::string output;  // stdout and stderr together
};

// Runs `nexus ARGS` through the shell (quote paths in `args` yourself).
inline CliResult run_cli(const std::string& args) {
  CliResult r;
  const std::string cmd = "'" + cli_path() + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  return r;
}

// Single-quotes `s` for the shell.
inline std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

}  // namespace nexus::test
