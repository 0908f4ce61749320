// The `nexus` command-line front door: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

#include "command.h"
#include "nexus/io/temp_file.h"

namespace nexus::cli {

std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

std::optional<DType> kv_cache_type(const std::string& name) {
  const auto t = dtype_from_name(name);
  if (!t || (*t != DType::kF16 && *t != DType::kF32 && *t != DType::kQ8_0)) return std::nullopt;
  return t;
}

std::optional<std::string> overwrites_source(const std::string& output,
                                             const std::vector<std::string>& sources) {
  for (const std::string& src : sources) {
    std::error_code ec;
    if (!src.empty() && std::filesystem::equivalent(src, output, ec))
      return "the output '" + output + "' is the input '" + src +
             "': writing it would replace the input; choose another path";
  }
  return std::nullopt;
}

int fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "nexus %s: error: %s\n", command.c_str(), message.c_str());
  return code;
}

std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const std::string& command) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(command, std::string(e.what()) + " (see 'nexus " + command + " --help')",
                kUsageError);
  }
  return std::nullopt;
}

}  // namespace nexus::cli

namespace {

void usage(FILE* out) {
  auto cmds = nexus::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::fprintf(out, "nexus: train, compress and serve language models\n\nusage: nexus COMMAND [options]\n\ncommands:\n");
  for (const auto& c : cmds) std::fprintf(out, "  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out, "\n'nexus COMMAND --help' shows a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("nexus %s\n", NEXUS_VERSION_STRING);
    return 0;
  }
  // An interrupted write (Ctrl-C during gen-model, convert, a checkpoint) leaves no partial file.
  nexus::remove_temp_files_on_signals();
  for (const auto& c : nexus::cli::registry()) {
    if (c.name != name) continue;
    try {
      return c.main(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      return nexus::cli::fail(name, e.what());
    }
  }
  std::fprintf(stderr, "nexus: error: unknown command '%s' (see 'nexus --help')\n", name.c_str());
  return 2;
}
