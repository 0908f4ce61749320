// Subcommand registry for the `nexus` CLI: each tools/cmd_*.cc registers one command.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nexus/dtype.h"

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

// The KV cache type of a --kv-type flag: f16, f32 or q8_0; nullopt for anything else.
std::optional<DType> kv_cache_type(const std::string& name);

// When an output path names one of `sources` (the same file by any spelling or link; empty names
// skipped): the message of the usage error that refuses it, since writing there would replace an
// input the command reads, with nothing to bring it back. Else nullopt.
std::optional<std::string> overwrites_source(const std::string& output,
                                             const std::vector<std::string>& sources);

// Exit code of a command-line usage error (bad or missing flag); 1 is for failures after parsing.
constexpr int kUsageError = 2;

// Parses the command's flags. Returns nullopt to go on, or the exit code to return now: 0 after
// --help (printed to stdout), kUsageError after a parse error (one line "nexus NAME: error: ...").
std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const std::string& command);

}  // namespace nexus::cli
