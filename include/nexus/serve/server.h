// `nexus serve`: an OpenAI-compatible HTTP server over the serving engine (serve/engine.h).
// Routes: POST /v1/completions, /v1/chat/completions (both with SSE streaming), GET /v1/models,
// POST /tokenize and /detokenize (llama-server's shapes), GET /health (503 while the model loads)
// and GET /metrics (Prometheus text format). With a cache, answers carry X-Nexus-Cache: memory,
// redis or miss (bypass: a request the cache does not keep). HTTP is cpp-httplib's (Debian's
// libcpp-httplib-dev).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "nexus/serve/cache.h"
#include "nexus/serve/engine.h"
#include "nexus/status.h"

namespace nexus::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (see Server::port)
  std::string api_key;            // when set, every route but /health and /metrics needs it
  std::string model_path;
  std::string model_alias;        // the name clients use (default: the file's stem)
  std::string draft_path;         // a draft model for speculative decoding (same vocabulary)
  std::string index_path;         // a vector index (nexus index build) for POST /v1/search
  EngineOptions engine;
  // Caches responses that do not change from one call to the next: completions with temperature
  // 0 or a seed (not streamed), embeddings and searches. Absent: no cache.
  std::optional<CacheOptions> cache;
  size_t max_body = 8u << 20;     // larger bodies get 413
  // Connections served at once (httplib runs one thread per open connection; a client keeping
  // its connection holds one). 0: 64 + 2 * max_seqs.
  int http_threads = 0;
};

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts answering (from other threads); the model loads in the background, /health
  // answering 503 until it is ready. An error names the address that could not be bound.
  Status start();
  int port() const;
  // Waits until the model is loaded; its error when loading failed.
  Status wait_loaded();
  // Stops taking requests (503), lets those in flight finish until `grace` has passed, cancels
  // the rest, and stops the HTTP server. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus::serve
