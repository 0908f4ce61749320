// Load on loopback, bounded: 32 concurrent clients x 500 requests each (streamed and not) against
// the real stories260K model. Every request completes or gets a proper error, nothing hangs, and
// the process's resident memory after the run is within 5% of its level after a warm-up.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/loopback.h"
#include "nexus/serve/server.h"
#include "test_paths.h"

namespace nexus::serve {
namespace {

using json = nlohmann::json;

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// One HTTP/1.1 request on its own connection (closed by the server after the answer), read to
// the end: the status and the raw body (chunked for streams: the test only looks for markers in
// it). Status 0 when the connection failed or the answer was cut.
struct Answer {
  int status = 0;
  std::string body;
};

Answer post(int port, const std::string& body) {
  Answer a;
  const int fd = test::connect_loopback(port, 60000);
  if (fd < 0) return a;
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return a;
  }
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t head = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.1 ", 0) != 0 || head == std::string::npos) return a;
  a.status = std::stoi(resp.substr(9, 3));
  a.body = resp.substr(head + 4);
  return a;
}

// Each of `clients` threads sends `per_client` requests one after another; returns how many got
// 200 and how many got a proper error (a status with an OpenAI error body).
void run(int port, int clients, int per_client, std::atomic<int>* ok, std::atomic<int>* errors,
         std::atomic<int>* broken) {
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([=] {
      for (int i = 0; i < per_client; ++i) {
        const bool stream = (i + t) % 3 == 0;
        const json body = {{"prompt", "Once upon a time " + std::to_string(t)},
                           {"max_tokens", 1 + (i % 4)}, {"temperature", 0.7}, {"seed", i},
                           {"stream", stream}};
        const Answer r = post(port, body.dump());
        if (r.status == 200 && (stream ? r.body.find("data: [DONE]") != std::string::npos
                                       : r.body.find("\"choices\"") != std::string::npos))
          ++*ok;
        else if (r.status >= 400 && json::parse(r.body, nullptr, false).contains("error"))
          ++*errors;
        else if (++*broken < 4)
          ADD_FAILURE() << "status " << r.status << ": " << r.body.substr(0, 300);
      }
    });
  for (auto& th : threads) th.join();
}

TEST(ServeLoad, ThirtyTwoClientsTimesFiveHundredRequestsAllComplete) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  ServerOptions o;
  o.model_path = test::shared_path("models/stories260K.gguf");
  o.port = 0;
  o.engine.n_ctx = 64;
  o.engine.max_seqs = 8;
  o.engine.n_threads = 1;
  o.http_threads = 40;
  Server s(o);
  ASSERT_TRUE(s.start());
  ASSERT_TRUE(s.wait_loaded());
  std::atomic<int> ok{0}, errors{0}, broken{0};
  run(s.port(), 32, 20, &ok, &errors, &broken);  // warm-up: every buffer and thread in place
  const int64_t warm = rss_bytes();
  run(s.port(), 32, 500, &ok, &errors, &broken);
  const int64_t after = rss_bytes();
  EXPECT_EQ(broken.load(), 0);
  EXPECT_EQ(ok.load() + errors.load(), 32 * 520);
  EXPECT_GT(ok.load(), 32 * 500);  // the queue (256) holds every client: errors are unexpected
  EXPECT_LE(after, warm + warm / 20) << "RSS " << warm << " -> " << after << " bytes";
  s.shutdown(std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace nexus::serve
