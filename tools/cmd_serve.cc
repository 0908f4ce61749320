// `nexus serve`: the OpenAI-compatible server (docs/SERVING.md). Binds, loads the model in the
// background (/health answers 503 meanwhile), then serves until SIGTERM or SIGINT, when it stops
// taking requests, lets those in flight finish for --shutdown-grace seconds and exits 0.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/serve/server.h"
#include "nexus/train/model_shape.h"

namespace nexus::cli {
namespace {

int serve_main(int argc, char** argv) {
  CLI::App app{"Serve a GGUF model over an OpenAI-compatible HTTP API", "nexus serve"};
  serve::ServerOptions o;
  std::string kv_memory = "0", kv_type = "f16";
  double grace = 10.0;
  std::string cache_url, cache_size = "64MiB";
  double cache_ttl = 600, cache_timeout_ms = 100;
  o.engine.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("-m,--model", o.model_path, "GGUF model file")->required();
  app.add_option("--alias", o.model_alias, "model name clients use (default: the file's stem)");
  app.add_option("--host", o.host, "address to bind")->capture_default_str();
  app.add_option("--port", o.port, "port (0: any free port, printed at start)")->capture_default_str();
  app.add_option("--api-key", o.api_key, "require 'Authorization: Bearer KEY'");
  app.add_option("--max-seqs", o.engine.max_seqs, "sequences generated together")
      ->capture_default_str();
  app.add_option("--max-batch-tokens", o.engine.max_batch_tokens,
                 "tokens per forward pass (decode tokens plus prompt chunks)")
      ->capture_default_str();
  app.add_option("--prefill-chunk", o.engine.prefill_chunk,
                 "prompt tokens per forward pass while other requests decode")
      ->capture_default_str();
  app.add_option("--kv-memory", kv_memory,
                 "bytes of the KV cache pool, e.g. 2GiB (0: max-seqs full contexts)")
      ->capture_default_str();
  app.add_option("--kv-block", o.engine.kv_block, "KV cache block size in positions")
      ->capture_default_str();
  app.add_option("--kv-type", kv_type, "KV cache type: f16, f32 or q8_0")->capture_default_str();
  app.add_option("-c,--ctx", o.engine.n_ctx, "context per sequence (0: the model's, at most 4096)")
      ->capture_default_str();
  app.add_option("-t,--threads", o.engine.n_threads, "threads")->capture_default_str();
  app.add_option("--max-queue", o.engine.max_queue, "waiting requests before 429")
      ->capture_default_str();
  app.add_option("--prefix-cache", o.engine.prefix_cache,
                 "finished sequences kept for their prompt prefixes (0: no prefix cache)")
      ->capture_default_str();
  app.add_option("--state-snapshots", o.engine.state_snapshots,
                 "recurrent models: snapshots of a sequence's state kept for shared prefixes "
                 "(0: whole states only)")
      ->capture_default_str();
  app.add_option("--state-interval", o.engine.state_interval,
                 "recurrent models: positions between state snapshots (a multiple of --kv-block)")
      ->capture_default_str();
  app.add_option("--index", o.index_path,
                 "vector index (nexus index build, with this model) served at POST /v1/search");
  app.add_option("--draft", o.draft_path,
                 "draft model for speculative decoding (same vocabulary; the output is the same)");
  app.add_option("--draft-max", o.engine.draft_max, "draft tokens proposed per step")
      ->capture_default_str();
  app.add_option("--lookup-ngram", o.engine.lookup_ngram,
                 "speculative decoding by prompt lookup: n-gram length (0: off)")
      ->capture_default_str();
  app.add_option("--lookup-max", o.engine.lookup_max, "most draft tokens verified per step")
      ->capture_default_str();
  app.add_option("--http-threads", o.http_threads,
                 "connections served at once (0: 64 + 2 * max-seqs)")
      ->capture_default_str();
  app.add_option("--cache", cache_url,
                 "cache repeatable responses: 'memory', or redis://[:PASSWORD@]HOST[:PORT][/DB] "
                 "for an in-process tier in front of a shared redis-server");
  app.add_option("--cache-size", cache_size, "bytes of the in-process cache tier (0: Redis only)")
      ->capture_default_str();
  app.add_option("--cache-ttl", cache_ttl, "seconds a cached response lives")
      ->capture_default_str();
  app.add_option("--cache-timeout", cache_timeout_ms,
                 "milliseconds a Redis connect or command may take before the cache is bypassed")
      ->capture_default_str();
  app.add_option("--shutdown-grace", grace, "seconds in-flight requests get at SIGTERM")
      ->capture_default_str();
  if (auto code = parse_args(app, argc, argv, "serve")) return *code;
  if (kv_memory != "0") {  // 0: max-seqs full contexts
    Result<uint64_t> kv_bytes = train::parse_byte_size(kv_memory);
    if (!kv_bytes)
      return fail("serve", "--kv-memory must be a size like 2GiB: " + kv_bytes.status().message(),
                  kUsageError);
    o.engine.kv_memory = static_cast<int64_t>(*kv_bytes);
  }
  const auto kv = kv_cache_type(kv_type);
  if (!kv) return fail("serve", "--kv-type must be f16, f32 or q8_0, got '" + kv_type + "'", kUsageError);
  o.engine.kv_type = *kv;
  if (o.port < 0 || o.port > 65535) return fail("serve", "--port must be in [0, 65535]", kUsageError);
  if (grace < 0) return fail("serve", "--shutdown-grace must be >= 0", kUsageError);
  if (!cache_url.empty()) {
    serve::CacheOptions c;
    c.url = cache_url;
    Result<uint64_t> bytes = train::parse_byte_size(cache_size);
    if (!bytes)
      return fail("serve", "--cache-size must be a size like 64MiB: " + bytes.status().message(),
                  kUsageError);
    c.memory_bytes = static_cast<size_t>(*bytes);
    if (!(cache_ttl > 0)) return fail("serve", "--cache-ttl must be > 0", kUsageError);
    if (!(cache_timeout_ms >= 1)) return fail("serve", "--cache-timeout must be >= 1", kUsageError);
    c.ttl = std::chrono::milliseconds(static_cast<int64_t>(cache_ttl * 1000));
    c.redis_timeout = std::chrono::milliseconds(static_cast<int64_t>(cache_timeout_ms));
    // A bad URL or size is a usage error now, not a failed load later.
    if (auto check = serve::ResponseCache::create(c); !check)
      return fail("serve", "--cache: " + check.status().message(), kUsageError);
    o.cache = c;
  }

  // SIGTERM and SIGINT are taken by sigwait below, on this thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  serve::Server server(o);
  if (Status st = server.start(); !st) return fail("serve", st.message());
  std::fprintf(stderr, "nexus serve: listening on http://%s:%d (loading %s)\n", o.host.c_str(),
               server.port(), o.model_path.c_str());
  if (Status st = server.wait_loaded(); !st) {
    server.shutdown(std::chrono::milliseconds(0));
    return fail("serve", st.message());
  }
  std::fprintf(stderr, "nexus serve: ready: %d sequences, %lld tokens per step\n",
               o.engine.max_seqs, static_cast<long long>(o.engine.max_batch_tokens));
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "nexus serve: %s: finishing requests in flight (up to %.0f s)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", grace);
  server.shutdown(std::chrono::milliseconds(static_cast<int64_t>(grace * 1000)));
  std::fprintf(stderr, "nexus serve: stopped\n");
  return 0;
}

const Register reg({"serve", "serve a model over an OpenAI-compatible HTTP API", serve_main});

}  // namespace
}  // namespace nexus::cli
