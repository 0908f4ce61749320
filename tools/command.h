// Subcommand registry for the `nexus` CLI: each tools/cmd_*.cc registers one command.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace nexus::cli {

struct Command {
  std::string name;
  std::string summary;
  // argv[0] is the subcommand name; returns the process exit code.
  std::function<int(int argc, char** argv)> main;
};

std::vector<Command>& registry();

struct Register {
  explicit Register(Command c) { registry().push_back(std::move(c)); }
};

// Prints "nexus NAME: error: MESSAGE" to stderr and returns exit code 1 (or `code`).
int fail(const std::string& command, const std::string& message, int code = 1);

}  // namespace nexus::cli
