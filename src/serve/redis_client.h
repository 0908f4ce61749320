// A small Redis client on hiredis (Debian's libhiredis-dev) for the shared response cache: GET and
// SET with an expiry, a pool of connections with timeouts, and a pause between reconnection tries
// so that a Redis that has gone away costs a request nothing but a flag check.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"

struct redisContext;

namespace nexus::serve {

// Where Redis is: redis://[:PASSWORD@]HOST[:PORT][/DB].
struct RedisAddress {
  std::string host;
  int port = 6379;
  std::string password;
  int db = 0;
};

// The address in a redis:// URL; the error names what is wrong with it.
Result<RedisAddress> parse_redis_url(std::string_view url);

class RedisClient {
 public:
  // `timeout` bounds each connect and each command; after a failure no connection is tried again
  // until `retry_after` has passed (the calls meanwhile fail at once).
  RedisClient(RedisAddress address, std::chrono::milliseconds timeout,
              std::chrono::milliseconds retry_after);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // The value at `key`, nullopt when there is none; an error when Redis could not answer.
  Result<std::optional<std::string>> get(std::string_view key);
  // SET key value PX ttl.
  Status set(std::string_view key, std::string_view value, std::chrono::milliseconds ttl);
  // Whether the last command (or connection attempt) succeeded.
  bool up() const;
  // Commands sent and the seconds they took (round trips, for /metrics).
  uint64_t calls() const;
  double seconds() const;

 private:
  // A connected context from the pool (`pooled`) or a new one; null (and the error) when none can
  // be had.
  redisContext* acquire(std::string* error, bool* pooled);
  // Runs one command (hiredis's argv form). A pooled connection that fails (Redis restarted since
  // it was opened) is replaced by a new one once before the command counts as failed.
  Result<std::optional<std::string>> command(const char* name, std::vector<std::string_view> args);
  // Back to the pool, or freed when it broke.
  void release(redisContext* c, bool broken);

  RedisAddress address_;
  std::chrono::milliseconds timeout_, retry_after_;
  mutable std::mutex mu_;
  std::vector<redisContext*> idle_;
  std::chrono::steady_clock::time_point next_try_{};
  bool up_ = false;
  uint64_t calls_ = 0;
  double seconds_ = 0;
};

}  // namespace nexus::serve
