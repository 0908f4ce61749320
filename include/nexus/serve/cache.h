// The server's response cache: an in-process LRU with a TTL and a byte bound, optionally in front
// of a shared redis-server (so replicas answer each other's repeated requests). Keys are SHA-256
// digests of what determines a response (the model's digest, the route, the request's fields);
// values are response bodies. When Redis goes away the cache carries on with its memory tier and
// reconnects later.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nexus/status.h"

namespace nexus::serve {

struct CacheOptions {
  // "memory" (the in-process tier only) or redis://[:PASSWORD@]HOST[:PORT][/DB] (both tiers).
  std::string url = "memory";
  size_t memory_bytes = 64u << 20;               // the in-process tier's bound (0: Redis only)
  std::chrono::milliseconds ttl{600'000};        // how long an entry lives, in both tiers
  std::chrono::milliseconds redis_timeout{100};  // each Redis connect and command
  std::chrono::milliseconds redis_retry{1000};   // pause after a Redis failure before a reconnect
};

// Where a lookup was answered.
enum class CacheTier { kMiss, kMemory, kRedis };

struct CacheStats {
  uint64_t memory_hits = 0, redis_hits = 0, misses = 0;
  uint64_t stores = 0, evictions = 0, expired = 0;
  uint64_t memory_entries = 0, memory_bytes = 0;
  bool redis = false;     // a Redis tier is configured
  bool redis_up = false;  // its last command succeeded
  uint64_t redis_errors = 0;
  uint64_t redis_calls = 0;
  double redis_seconds = 0;  // time spent in Redis round trips
};

class ResponseCache {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // An error names a bad URL or option; an unreachable Redis is not one (it is retried).
  static Result<std::unique_ptr<ResponseCache>> create(CacheOptions options, Clock clock = {});
  ~ResponseCache();
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  // The value under `key` (memory first, then Redis, whose hits are copied into memory).
  std::optional<std::string> get(const std::string& key, CacheTier* tier = nullptr);
  // Stores in both tiers; a value larger than the memory bound goes to Redis only.
  void put(const std::string& key, const std::string& value);
  CacheStats stats() const;

 private:
  struct Impl;
  explicit ResponseCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Lowercase hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);
// The SHA-256 of a whole file (hex); the error names the file.
Result<std::string> file_sha256_hex(const std::string& path);

}  // namespace nexus::serve
