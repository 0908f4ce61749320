// Paths the tests need: fixtures in the repo, ../shared beside the checkout (optional), the CLI.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace nexus::test {

inline std::string fixtures_dir() { return NEXUS_FIXTURES_DIR; }
inline std::string cli_path() { return NEXUS_CLI_PATH; }
// ../shared, or $NEXUS_SHARED when set.
inline std::string shared_dir() {
  const char* env = std::getenv("NEXUS_SHARED");
  return env ? env : NEXUS_SHARED_DIR;
}
inline std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }

}  // namespace nexus::test

// Skips the current test with a clear message when a file from ../shared is missing.
#define NEXUS_REQUIRE_SHARED(rel)                                                          \
  do {                                                                                     \
    if (!std::filesystem::exists(::nexus::test::shared_path(rel)))                         \
      GTEST_SKIP() << "needs ../shared/" << (rel) << " (not present: " \
                   << ::nexus::test::shared_path(rel) << ")";                              \
  } while (0)
