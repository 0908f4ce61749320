// The HTTP server on the real stories260K model, in process on a free loopback port: OpenAI's
// response and stream shapes, outputs equal to `generate()`, concurrent clients, errors with
// their statuses, authentication, disconnects, and /metrics checked by promtool.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "e2e/loopback.h"
#include "nexus/context.h"
#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/runtime/embedding.h"
#include "nexus/runtime/generator.h"
#include "nexus/runtime/vector_index.h"
#include "nexus/serve/server.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus::serve {
namespace {

using json = nlohmann::json;
constexpr const char* kModel = "models/stories260K.gguf";

std::unique_ptr<Server> start(ServerOptions o = {}) {
  o.model_path = test::shared_path(kModel);
  o.host = "127.0.0.1";
  o.port = 0;
  o.engine.n_ctx = 256;
  o.engine.max_seqs = 4;
  auto s = std::make_unique<Server>(o);
  EXPECT_TRUE(s->start());
  EXPECT_TRUE(s->wait_loaded());
  return s;
}

httplib::Client client(const Server& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30, 0);
  return c;
}

// What `nexus run --temp 0 -n N` prints for the prompt.
std::string expected_text(const std::string& prompt, int64_t n) {
  auto m = Model::load(test::shared_path(kModel));
  auto t = Tokenizer::from_gguf((*m)->gguf());
  ContextOptions co;
  co.n_ctx = 256;
  auto ctx = Context::create(**m, co);
  GenerateOptions g;
  g.sampler.temperature = 0.0f;
  g.n_predict = n;
  std::string out;
  auto r = generate(**ctx, **t, prompt, g, [&](std::string_view s) {
    out += s;
    return true;
  });
  EXPECT_TRUE(r);
  return out;
}

json post(httplib::Client& c, const std::string& path, const json& body, int want_status) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r) << path;
  if (!r) return json();
  EXPECT_EQ(r->status, want_status) << r->body;
  return json::parse(r->body);
}

// The "data: ..." payloads of an SSE body.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

TEST(ServeHttp, CompletionEqualsGenerateAndReportsUsage) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  auto c = client(*s);
  const json r = post(c, "/v1/completions",
                      {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}}, 200);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["model"], "stories260K");
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["text"], expected_text("Once upon a time", 24));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 24);
  EXPECT_EQ(r["usage"]["total_tokens"],
            r["usage"]["prompt_tokens"].get<int>() + 24);
  // Token-id prompts and lists of prompts give one choice each, in order.
  const json ids = post(c, "/tokenize", {{"content", "Once upon a time"}, {"add_special", true}}, 200);
  const json two = post(c, "/v1/completions",
                        {{"prompt", json::array({ids["tokens"], "Once upon a time"})},
                         {"max_tokens", 24}, {"temperature", 0}}, 200);
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["choices"][0]["text"], r["choices"][0]["text"]);
  EXPECT_EQ(two["choices"][1]["text"], r["choices"][0]["text"]);
  EXPECT_EQ(two["choices"][1]["index"], 1);
}

TEST(ServeHttp, StreamsServerSentEventsAsOpenAIClientsParseThem) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  auto c = client(*s);
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                     {"max_tokens", 12}, {"temperature", 0}, {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> data = sse_data(r->body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  const json first = json::parse(data.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i + 3 < data.size(); ++i) {  // the content chunks
    const json ch = json::parse(data[i]);
    EXPECT_TRUE(ch["choices"][0]["finish_reason"].is_null());
    text += ch["choices"][0]["delta"]["content"].get<std::string>();
  }
  const json last = json::parse(data[data.size() - 3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(data[data.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 12);
  // The same request without streaming gives the same text.
  json plain = body;
  plain.erase("stream");
  plain.erase("stream_options");
  const json whole = post(c, "/v1/chat/completions", plain, 200);
  EXPECT_EQ(whole["choices"][0]["message"]["content"], text);
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
}

TEST(ServeHttp, ConcurrentClientsGetTheirOwnGreedyOutputs) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "One day",
                                            "Lily and Ben"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) want.push_back(expected_text(p, 20));
  std::vector<std::thread> threads;
  std::vector<std::string> got(12);
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto c = client(*s);
      auto r = c.Post("/v1/completions",
                      json{{"prompt", prompts[i % prompts.size()]}, {"max_tokens", 20},
                           {"temperature", 0}}
                          .dump(),
                      "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body)["choices"][0]["text"];
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i % prompts.size()]) << i;
}

TEST(ServeHttp, BadRequestsGetOpenAIErrorsWithTheRightStatus) {
  NEXUS_REQUIRE_SHARED(kModel);
  ServerOptions o;
  o.max_body = 4096;
  auto s = start(o);
  auto c = client(*s);
  auto status = [&](const std::string& path, const std::string& body) {
    auto r = c.Post(path.c_str(), body, "application/json");
    if (!r) return -1;
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error") && j["error"].contains("message") && j["error"].contains("type"))
        << r->body;
    return r->status;
  };
  EXPECT_EQ(status("/v1/completions", "{not json"), 400);
  EXPECT_EQ(status("/v1/completions", "[1, 2]"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"max_tokens": 4})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "temperature": "warm"})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "temperature": 7})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "max_tokens": -2})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "max_tokens": 1e300})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "n": 99})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": [1, -5]})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": [1, 99999]})"), 400);
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "stop": [1]})"), 400);
  EXPECT_EQ(status("/v1/chat/completions", R"({"messages": []})"), 400);
  EXPECT_EQ(status("/v1/chat/completions", R"({"messages": [{"content": "x"}]})"), 400);
  std::string longp;
  for (int i = 0; i < 300; ++i) longp += " dog";
  EXPECT_EQ(status("/v1/completions", json{{"prompt", longp}}.dump()), 400);  // > 256 tokens
  EXPECT_EQ(status("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})"), 404);
  EXPECT_EQ(status("/v1/nothing", "{}"), 404);
  EXPECT_EQ(status("/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump()), 413);
  EXPECT_EQ(status("/detokenize", R"({"tokens": [5, 100000]})"), 400);
  // Still serving.
  post(c, "/v1/completions", {{"prompt", "One"}, {"max_tokens", 2}}, 200);
}

TEST(ServeHttp, AnApiKeyGuardsEveryRouteButHealthAndMetrics) {
  NEXUS_REQUIRE_SHARED(kModel);
  ServerOptions o;
  o.api_key = "sekret";
  auto s = start(o);
  auto c = client(*s);
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  r = c.Get("/v1/models", {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(r->status, 401);
  r = c.Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "stories260K");
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
}

TEST(ServeHttp, TokenizeAndDetokenizeRoundTrip) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  auto c = client(*s);
  const json t = post(c, "/tokenize", {{"content", "Hello world"}, {"with_pieces", true}}, 200);
  ASSERT_FALSE(t["tokens"].empty());
  json ids = json::array();
  std::string pieces;
  for (const json& e : t["tokens"]) {
    ids.push_back(e["id"]);
    pieces += e["piece"].get<std::string>();
  }
  EXPECT_EQ(pieces, " Hello world");
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", ids}}, 200)["content"], "Hello world");
}

TEST(ServeHttp, AClientThatLeavesMidStreamCancelsItsSequence) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  {
    auto c = client(*s);
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    // Sixteen choices to the context's end: far more work than the two chunks read before the
    // client goes, so the disconnect is seen while they run.
    req.body = json{{"prompt", "Once"}, {"max_tokens", 100000}, {"n", 16}, {"stream", true},
                    {"temperature", 0.9}}
                   .dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
    c.send(req);  // the receiver's false closes the connection
  }
  auto c = client(*s);
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    metrics = c.Get("/metrics")->body;
    if (metrics.find("nexus_finished_total{reason=\"cancelled\"} 0") == std::string::npos &&
        metrics.find("nexus_running_sequences 0") != std::string::npos &&
        metrics.find("nexus_kv_blocks_used 0") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(metrics.find("nexus_finished_total{reason=\"cancelled\"} 0"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("nexus_running_sequences 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("nexus_kv_blocks_used 0"), std::string::npos) << metrics;
}

// HTTP/1.0 has no chunked encoding: the stream goes out as is and ends when the server closes the
// connection (how nginx with proxy_http_version 1.0 tells a finished stream from a cut one).
TEST(ServeHttp, AnHttp10StreamIsDelimitedByTheConnectionsClose) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto s = start();
  const int fd = test::connect_loopback(s->port(), 30000);
  ASSERT_GE(fd, 0);
  const std::string body =
      json{{"prompt", "Once"}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}}.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.0\r\nHost: x\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_EQ(n, 0) << "the server did not close the connection";
  const size_t head_end = got.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << got;
  const std::string head = got.substr(0, head_end);
  EXPECT_NE(head.find("200 OK"), std::string::npos) << head;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  const std::vector<std::string> data = sse_data(got.substr(head_end + 4));
  ASSERT_GE(data.size(), 3u) << got;
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < data.size(); ++i)
    text += json::parse(data[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expected_text("Once", 8));
}

// With --cache memory: a greedy completion asked twice is computed once (the second answer is the
// first's, under a new id), sampling without a seed is not kept, embeddings are, and /metrics
// counts it all.
TEST(ServeHttp, TheCacheAnswersRepeatableRequestsOnce) {
  NEXUS_REQUIRE_SHARED(kModel);
  ServerOptions o;
  o.cache = CacheOptions{};
  auto s = start(o);
  auto c = client(*s);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
  auto first = c.Post("/v1/completions", body.dump(), "application/json");
  auto second = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->get_header_value("X-Nexus-Cache"), "miss");
  EXPECT_EQ(second->get_header_value("X-Nexus-Cache"), "memory");
  json a = json::parse(first->body), b = json::parse(second->body);
  EXPECT_EQ(a["choices"][0]["text"], expected_text("Once upon a time", 16));
  EXPECT_NE(a["id"], b["id"]);
  a.erase("id");
  b.erase("id");
  a.erase("created");
  b.erase("created");
  EXPECT_EQ(a, b);
  // Where the answer to `changed` (the body with one field set) came from.
  auto tier_of = [&](const char* field, const json& value) {
    json changed = body;
    changed[field] = value;
    return c.Post("/v1/completions", changed.dump(), "application/json")
        ->get_header_value("X-Nexus-Cache");
  };
  // Another field (max_tokens) is another key; `user` is not part of the key.
  EXPECT_EQ(tier_of("max_tokens", 17), "miss");
  EXPECT_EQ(tier_of("user", "someone"), "memory");
  // Sampling without a seed, and streams, are not kept; a seed makes sampling repeatable.
  EXPECT_EQ(tier_of("temperature", 0.8), "bypass");
  EXPECT_EQ(tier_of("stream", true), "bypass");
  json sampled = body;
  sampled["temperature"] = 0.8;
  sampled["seed"] = 7;
  auto s1 = c.Post("/v1/completions", sampled.dump(), "application/json");
  auto s2 = c.Post("/v1/completions", sampled.dump(), "application/json");
  EXPECT_EQ(s1->get_header_value("X-Nexus-Cache"), "miss");
  EXPECT_EQ(s2->get_header_value("X-Nexus-Cache"), "memory");
  EXPECT_EQ(json::parse(s1->body)["choices"], json::parse(s2->body)["choices"]);
  // Embeddings; a bad request is answered (400) before the cache is asked, and never kept.
  const json emb = {{"input", "Once upon a time"}};
  auto e1 = c.Post("/v1/embeddings", emb.dump(), "application/json");
  auto e2 = c.Post("/v1/embeddings", emb.dump(), "application/json");
  EXPECT_EQ(e1->get_header_value("X-Nexus-Cache"), "miss");
  EXPECT_EQ(e2->get_header_value("X-Nexus-Cache"), "memory");
  EXPECT_EQ(e1->body, e2->body);
  post(c, "/v1/completions", {{"prompt", "x"}, {"temperature", 0}, {"max_tokens", -5}}, 400);
  post(c, "/v1/completions", {{"prompt", "x"}, {"temperature", 0}, {"max_tokens", -5}}, 400);
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("nexus_cache_hits_total{tier=\"memory\"} 4"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("nexus_cache_misses_total 4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("nexus_cache_stores_total 4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("nexus_cache_memory_entries 4"), std::string::npos) << metrics;
}

TEST(ServeHttp, MetricsPassPromtool) {
  NEXUS_REQUIRE_SHARED(kModel);
  if (std::system("command -v promtool > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs promtool (Debian's prometheus package; make deps installs it)";
  auto s = start();
  auto c = client(*s);
  post(c, "/v1/completions", {{"prompt", "One"}, {"max_tokens", 3}}, 200);
  // A request is counted once its answer has gone out, which the client may see first.
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = c.Get("/metrics")->body;
    if (text.find("route=\"/v1/completions\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(text.find("nexus_generated_tokens_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("nexus_requests_total{route=\"/v1/completions\",status=\"200\"} 1"),
            std::string::npos)
      << text;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("nexus_metrics_" + std::to_string(getpid()))).string();
  std::ofstream(path) << text;
  const int rc = std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  const std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << report;
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".out");
}

// stories260K with a chat template in its metadata: the chat prompt is the template's rendering
// (with a macro, and the request's tools), and the template's raise_exception is the client's 400.
TEST(ServeHttp, ChatPromptsComeFromTheModelsTemplate) {
  NEXUS_REQUIRE_SHARED(kModel);
  auto src = GgufFile::open(test::shared_path(kModel));
  ASSERT_TRUE(src);
  GgufWriter w;
  w.copy_metadata(*src, [](std::string_view k) { return k == "tokenizer.chat_template"; });
  w.set_string("tokenizer.chat_template",
               "{% macro tool_line(f) %}TOOL {{ f['name'] }}\n{% endmacro %}"
               "{% if tools %}{% for t in tools %}{{ tool_line(t['function']) }}{% endfor %}{% endif %}"
               "{% for m in messages %}{% if m['role'] == 'assistant' %}"
               "{{ raise_exception('no assistant turns here') }}{% endif %}"
               "{{ m['role'] | upper + ': ' + m['content'] | trim + '\n' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}");
  for (const GgufTensorInfo& t : src->tensors()) w.add_tensor(t.name, t.dtype, t.shape, t.data);
  const std::string path = ::testing::TempDir() + "stories_chat_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(w.write(path));
  ServerOptions o;
  o.model_path = path;
  o.port = 0;
  o.engine.n_ctx = 256;
  Server s(o);
  ASSERT_TRUE(s.start());
  ASSERT_TRUE(s.wait_loaded());
  httplib::Client c("127.0.0.1", s.port());
  const std::string rendered = "SYSTEM: Be kind.\nUSER: Hi\nASSISTANT:";
  const json want = post(c, "/tokenize", {{"content", rendered}}, 200);
  const json r = post(c, "/v1/chat/completions",
                      {{"model", "stories_chat_" + std::to_string(getpid())},
                       {"messages", json::array({{{"role", "system"}, {"content", "Be kind. "}},
                                                 {{"role", "user"}, {"content", " Hi"}}})},
                       {"max_tokens", 4}, {"temperature", 0}},
                      200);
  EXPECT_EQ(r["usage"]["prompt_tokens"], want["tokens"].size());
  const json tools = json::array(
      {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", json::object()}}}}});
  const json want_tools = post(c, "/tokenize", {{"content", "TOOL get_weather\n" + rendered}}, 200);
  const json rt = post(c, "/v1/chat/completions",
                       {{"messages", json::array({{{"role", "system"}, {"content", "Be kind. "}},
                                                  {{"role", "user"}, {"content", " Hi"}}})},
                        {"tools", tools}, {"max_tokens", 4}, {"temperature", 0}},
                       200);
  EXPECT_EQ(rt["usage"]["prompt_tokens"], want_tools["tokens"].size());
  post(c, "/v1/chat/completions",
       {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"tools", "nope"}}, 400);
  const json bad = post(c, "/v1/chat/completions",
                        {{"messages", json::array({{{"role", "assistant"}, {"content", "x"}}})}},
                        400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("no assistant turns here"),
            std::string::npos);
  s.shutdown(std::chrono::milliseconds(0));
  std::remove(path.c_str());
}

TEST(ServeHttp, HealthSays503AndLoadingFailsWhenTheModelIsMissing) {
  ServerOptions o;
  o.model_path = "/nonexistent/model.gguf";
  o.port = 0;
  Server s(o);
  ASSERT_TRUE(s.start());
  const Status st = s.wait_loaded();
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("/nonexistent/model.gguf"), std::string::npos) << st.message();
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(c.Post("/v1/completions", R"({"prompt": "x"})", "application/json")->status, 503);
}

}  // namespace
}  // namespace nexus::serve

namespace nexus::serve {
namespace {

// POST /v1/search: the index's best documents for the query, embedded as /v1/embeddings does;
// the same hits as the index searched in process; errors with their statuses; an index built with
// another model stops the server from loading.
TEST(ServeHttp, SearchAnswersFromTheVectorIndex) {
  NEXUS_REQUIRE_SHARED(kModel);
  const std::vector<std::string> texts = {
      "Once upon a time there was a little cat.", "The dog ran to the park to play with a ball.",
      "Lily liked to eat red apples with her mom.", "The sun was big and bright in the sky."};
  auto m = Model::load(test::shared_path(kModel));
  ASSERT_TRUE(m);
  auto t = Tokenizer::from_gguf((*m)->gguf());
  ContextOptions co;
  co.n_ctx = 256;
  auto ctx = Context::create(**m, co);
  std::vector<float> vecs;
  std::vector<std::string> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto e = embed_tokens(**ctx, 0, (*t)->encode(texts[i], true), 64);
    ASSERT_TRUE(e);
    vecs.insert(vecs.end(), e->begin(), e->end());
    ids.push_back("doc" + std::to_string(i));
  }
  const int64_t dim = (*m)->config().dim;
  const std::string path = ::testing::TempDir() + "/serve_index.nxvi";
  auto ix = VectorIndex::build(ids, vecs, dim, DType::kF32,
                               index_model_label(test::shared_path(kModel), dim));
  ASSERT_TRUE(ix);
  ASSERT_TRUE(ix->save(path));
  ServerOptions o;
  o.index_path = path;
  auto s = start(o);
  auto c = client(*s);
  const json r = post(c, "/v1/search", {{"query", texts[2]}, {"top_k", 3}}, 200);
  ASSERT_EQ(r["data"].size(), 1u);
  const json& hits = r["data"][0]["results"];
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0]["id"], "doc2");
  EXPECT_NEAR(hits[0]["score"].get<double>(), 1.0, 1e-4);
  const auto want = ix->search(std::span<const float>(vecs).subspan(2 * dim, dim), 1, 3);
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(hits[j]["id"], want[0][j].id);
    EXPECT_NEAR(hits[j]["score"].get<double>(), want[0][j].score, 1e-4);
  }
  const json two = post(c, "/v1/search", {{"query", {texts[0], texts[3]}}}, 200);
  ASSERT_EQ(two["data"].size(), 2u);
  EXPECT_EQ(two["data"][1]["results"][0]["id"], "doc3");
  EXPECT_EQ(two["data"][0]["results"].size(), 4u);  // top_k 5, four documents
  post(c, "/v1/search", {{"top_k", 3}}, 400);
  post(c, "/v1/search", {{"query", "x"}, {"top_k", 0}}, 400);
  post(c, "/v1/search", {{"query", json::array()}}, 400);
  s->shutdown(std::chrono::milliseconds(1000));

  auto plain = start();
  auto pc = client(*plain);
  const json none = post(pc, "/v1/search", {{"query", "x"}}, 404);
  EXPECT_NE(none["error"]["message"].get<std::string>().find("--index"), std::string::npos);
  plain->shutdown(std::chrono::milliseconds(1000));

  auto other = VectorIndex::build(ids, vecs, dim, DType::kF32, "another.gguf:64");
  ASSERT_TRUE(other->save(path));
  o.model_path = test::shared_path(kModel);
  o.port = 0;
  Server wrong(o);
  ASSERT_TRUE(wrong.start());
  const Status st = wrong.wait_loaded();
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("was built with another.gguf:64"), std::string::npos) << st.message();
  wrong.shutdown(std::chrono::milliseconds(100));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace nexus::serve
