// Bad input against the running server: a few thousand malformed requests (mutated and truncated
// JSON, wrong types, huge numbers, deep nesting, odd routes and methods, raw garbage, early
// disconnects, a slow client). Every answer is a proper status with a JSON error for 4xx, never a
// 5xx, and afterwards the server still answers a real request correctly.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "e2e/loopback.h"
#include "nexus/serve/server.h"
#include "test_paths.h"

namespace nexus::serve {
namespace {

using json = nlohmann::json;

// Sends raw bytes on a new connection and closes it, optionally after reading a little.
void raw(int port, const std::string& bytes, bool read_reply) {
  const int fd = test::connect_loopback(port, 200);
  if (fd < 0) return;
  (void)!write(fd, bytes.data(), bytes.size());
  if (read_reply) {
    char buf[256];
    (void)!read(fd, buf, sizeof(buf));
  }
  close(fd);
}

TEST(ServeFuzz, MalformedRequestsGetCleanErrorsAndTheServerStaysUp) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  ServerOptions o;
  o.model_path = test::shared_path("models/stories260K.gguf");
  o.port = 0;
  o.engine.n_ctx = 64;
  o.engine.max_seqs = 4;
  o.max_body = 1 << 20;
  Server s(o);
  ASSERT_TRUE(s.start());
  ASSERT_TRUE(s.wait_loaded());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30, 0);

  const std::vector<std::string> seeds = {
      R"({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})",
      R"({"prompt": [1, 400, 500], "max_tokens": 3, "stop": ["\n", "x"], "n": 2})",
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": true})",
      R"({"prompt": "a", "max_tokens": 2, "logprobs": 2, "top_p": 0.5, "seed": 7})",
      R"({"content": "Hello world", "with_pieces": true})",
      R"({"tokens": [1, 2, 3]})"};
  const std::vector<std::string> paths = {"/v1/completions", "/v1/chat/completions", "/tokenize",
                                          "/detokenize", "/v1/models", "/v1/completions/x", "/"};
  const std::vector<std::string> junk = {"null", "-1", "1e999", "18446744073709551616", "\"x\"",
                                         "[]", "{}", "true", "[[[[", "\"\\ud800\"", "0.5"};
  std::mt19937 rng(1234);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int n5xx = 0, bad_body = 0, sent = 0;
  for (int i = 0; i < 2500; ++i) {
    std::string body = seeds[pick(seeds.size())];
    switch (i % 5) {
      case 0:  // flip bytes
        for (int k = 0; k < 3; ++k) body[pick(body.size())] = static_cast<char>(rng() & 0xff);
        break;
      case 1:  // truncate
        body.resize(pick(body.size()));
        break;
      case 2: {  // replace a value with junk
        const size_t colon = body.find(':', pick(body.size()));
        if (colon != std::string::npos) {
          const size_t end = body.find_first_of(",}", colon);
          body = body.substr(0, colon + 1) + junk[pick(junk.size())] +
                 (end == std::string::npos ? "" : body.substr(end));
        }
        break;
      }
      case 3:  // huge numbers and odd values for known fields
        body = json{{"prompt", "x"},
                    {std::vector<std::string>{"max_tokens", "n", "temperature", "top_k", "seed",
                                              "logprobs", "top_p", "min_p"}[pick(8)],
                     json::parse(junk[pick(junk.size())], nullptr, false)}}
                   .dump();
        break;
      default:  // valid
        break;
    }
    const std::string path = paths[pick(paths.size())];
    auto r = pick(4) == 0 ? c.Get(path.c_str()) : c.Post(path.c_str(), body, "application/json");
    ++sent;
    ASSERT_TRUE(r) << "no answer to request " << i << " " << path << " " << body;
    if (r->status >= 500 && ++n5xx < 5)
      ADD_FAILURE() << r->status << " " << path << " " << body << " -> " << r->body;
    if (r->status >= 400) {
      const json j = json::parse(r->body, nullptr, false);
      if (j.is_discarded() || !j.contains("error")) ++bad_body;
    }
  }
  EXPECT_EQ(n5xx, 0);
  EXPECT_EQ(bad_body, 0);
  // Deep nesting, garbage, half requests, early disconnects and a slow client.
  auto deep = c.Post("/v1/completions", std::string(200000, '[') , "application/json");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);
  for (int i = 0; i < 100; ++i) {
    std::string g(1 + pick(300), '\0');
    for (char& ch : g) ch = static_cast<char>(rng() & 0xff);
    raw(s.port(), g, i % 2 == 0);
    raw(s.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"pro",
        false);
    raw(s.port(),
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n"
        "{\"prompt\": \"Once\", \"max_tokens\": 30, \"stream\": true}",
        false);  // gone before the answer
  }
  std::thread slow([&] {
    raw(s.port(), "POST /tokenize HTTP/1.1\r\nHost: x\r\n", false);
  });
  slow.join();
  // Still serving, correctly.
  auto r = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], ", there was a little girl");
  EXPECT_GE(sent, 2500);
  s.shutdown(std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace nexus::serve
