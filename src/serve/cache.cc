// The two cache tiers. Memory: a list in recency order plus a hash map into it; every entry counts
// its key and value bytes plus a fixed overhead against the bound, and the least recently used go
// first. Redis: values carry their wall-clock expiry in front, so a Redis hit copied into memory
// expires when it does in Redis, not a full TTL later.
#include "nexus/serve/cache.h"

#include <openssl/evp.h>

#include <charconv>
#include <cstdio>
#include <list>
#include <mutex>
#include <unordered_map>

#include "serve/redis_client.h"

namespace nexus::serve {
namespace {

constexpr size_t kEntryOverhead = 96;  // list node, map node, two strings' headers

std::string hex(const unsigned char* p, size_t n) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return hex(md, n);
}

Result<std::string> file_sha256_hex(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::error(path + ": cannot open to compute its digest");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::string buf(1 << 20, '\0');
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0)
    EVP_DigestUpdate(ctx, buf.data(), got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, md, &n);
  EVP_MD_CTX_free(ctx);
  if (failed) return Status::error(path + ": read error while computing its digest");
  return hex(md, n);
}

struct ResponseCache::Impl {
  struct Entry {
    std::string key, value;
    std::chrono::steady_clock::time_point expires;
  };

  CacheOptions opts;
  Clock clock;
  std::unique_ptr<RedisClient> redis;
  std::string redis_prefix = "nexus:cache:";

  mutable std::mutex mu;
  std::list<Entry> lru;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> map;
  size_t bytes = 0;
  CacheStats stats;

  static size_t cost(const Entry& e) { return e.key.size() + e.value.size() + kEntryOverhead; }

  void erase(std::list<Entry>::iterator it) {
    bytes -= cost(*it);
    map.erase(it->key);
    lru.erase(it);
  }

  // Under mu.
  void insert(const std::string& key, const std::string& value,
              std::chrono::steady_clock::time_point expires) {
    if (auto it = map.find(key); it != map.end()) erase(it->second);
    Entry e{key, value, expires};
    if (cost(e) > opts.memory_bytes) return;
    bytes += cost(e);
    lru.push_front(std::move(e));
    map.emplace(key, lru.begin());
    while (bytes > opts.memory_bytes) {
      erase(std::prev(lru.end()));
      ++stats.evictions;
    }
  }
};

ResponseCache::ResponseCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResponseCache::~ResponseCache() = default;

Result<std::unique_ptr<ResponseCache>> ResponseCache::create(CacheOptions options, Clock clock) {
  auto impl = std::make_unique<Impl>();
  if (options.ttl.count() <= 0) return Status::error("cache: the TTL must be positive");
  if (options.url != "memory") {
    Result<RedisAddress> a = parse_redis_url(options.url);
    if (!a) return Status::error("cache: " + a.status().message() + " (or 'memory')");
    if (options.redis_timeout.count() <= 0)
      return Status::error("cache: the Redis timeout must be positive");
    impl->redis = std::make_unique<RedisClient>(std::move(a).value(), options.redis_timeout,
                                                options.redis_retry);
  } else if (options.memory_bytes == 0) {
    return Status::error("cache: 'memory' with a size of 0 caches nothing");
  }
  impl->opts = std::move(options);
  impl->clock = clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); };
  return std::unique_ptr<ResponseCache>(new ResponseCache(std::move(impl)));
}

std::optional<std::string> ResponseCache::get(const std::string& key, CacheTier* tier) {
  Impl& m = *impl_;
  if (tier != nullptr) *tier = CacheTier::kMiss;
  const auto now = m.clock();
  {
    std::lock_guard lock(m.mu);
    if (auto it = m.map.find(key); it != m.map.end()) {
      if (it->second->expires > now) {
        m.lru.splice(m.lru.begin(), m.lru, it->second);
        ++m.stats.memory_hits;
        if (tier != nullptr) *tier = CacheTier::kMemory;
        return it->second->value;
      }
      m.erase(it->second);
      ++m.stats.expired;
    }
  }
  if (m.redis) {
    Result<std::optional<std::string>> r = m.redis->get(m.redis_prefix + key);
    if (!r) {
      std::lock_guard lock(m.mu);
      ++m.stats.redis_errors;
    } else if (r->has_value()) {
      // "EXPIRES_MS\n" + value (see put).
      const std::string& stored = **r;
      const size_t nl = stored.find('\n');
      int64_t expires_ms = 0;
      if (nl != std::string::npos &&
          std::from_chars(stored.data(), stored.data() + nl, expires_ms).ec == std::errc()) {
        const int64_t left = expires_ms - wall_ms();
        if (left > 0) {
          std::string value = stored.substr(nl + 1);
          std::lock_guard lock(m.mu);
          ++m.stats.redis_hits;
          if (m.opts.memory_bytes > 0) m.insert(key, value, now + std::chrono::milliseconds(left));
          if (tier != nullptr) *tier = CacheTier::kRedis;
          return value;
        }
      }
    }
  }
  std::lock_guard lock(m.mu);
  ++m.stats.misses;
  return std::nullopt;
}

void ResponseCache::put(const std::string& key, const std::string& value) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    ++m.stats.stores;
    if (m.opts.memory_bytes > 0) m.insert(key, value, m.clock() + m.opts.ttl);
  }
  if (m.redis) {
    const std::string stored = std::to_string(wall_ms() + m.opts.ttl.count()) + "\n" + value;
    if (!m.redis->set(m.redis_prefix + key, stored, m.opts.ttl)) {
      std::lock_guard lock(m.mu);
      ++m.stats.redis_errors;
    }
  }
}

CacheStats ResponseCache::stats() const {
  const Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  CacheStats s = m.stats;
  s.memory_entries = m.map.size();
  s.memory_bytes = m.bytes;
  if (m.redis) {
    s.redis = true;
    s.redis_up = m.redis->up();
    s.redis_calls = m.redis->calls();
    s.redis_seconds = m.redis->seconds();
  }
  return s;
}

}  // namespace nexus::serve
