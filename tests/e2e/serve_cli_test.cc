// `nexus serve` as a process: flag errors, then a real server on a free port that answers, and on
// SIGTERM finishes the request in flight and exits 0.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "e2e/cli_util.h"

namespace nexus::test {
namespace {

TEST(ServeCli, BadFlagsAreUsageErrors) {
  auto r = run_cli("serve -m x.gguf --kv-memory lots");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("--kv-memory must be a size"), std::string::npos) << r.err;
  r = run_cli("serve -m x.gguf --port 70000");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cli("serve -m x.gguf --cache http://localhost:6379");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.err.find("'http://localhost:6379' is not a redis://"), std::string::npos) << r.err;
  r = run_cli("serve -m x.gguf --cache memory --cache-size 0");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cli("serve -m x.gguf --cache memory --cache-ttl 0");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cli("serve -m /nonexistent.gguf --port 0");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

TEST(ServeCli, ServesThenExitsZeroOnSigtermAfterTheRequestInFlight) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string err_path = ::testing::TempDir() + "nexus_serve_" + std::to_string(getpid());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = std::freopen(err_path.c_str(), "w", stderr);
    (void)f;
    const std::string model = shared_path("models/stories260K.gguf");
    execl(cli_path().c_str(), "nexus", "serve", "-m", model.c_str(), "--port", "0", "-t", "1",
          "-c", "256", static_cast<char*>(nullptr));
    _exit(127);
  }
  int port = 0;
  const std::regex listening("listening on http://127\\.0\\.0\\.1:(\\d+)");
  for (int i = 0; i < 500; ++i) {
    std::ifstream f(err_path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::smatch m;
    const std::string text = ss.str();
    if (std::regex_search(text, m, listening) && text.find("ready") != std::string::npos) {
      port = std::stoi(m[1]);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(port, 0) << "the server did not say it was ready";
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  EXPECT_EQ(c.Get("/health")->status, 200);
  // A long generation in flight when SIGTERM comes: it finishes (within the grace period).
  std::thread request([&] {
    auto r = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 150, "temperature": 0})",
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("\"finish_reason\""), std::string::npos);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGTERM);
  request.join();
  int status = 0;
  for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the server did not exit after SIGTERM";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::remove(err_path.c_str());
}

}  // namespace
}  // namespace nexus::test
