// The server's response cache: the in-process LRU's bound, order and TTL on a fake clock, Redis
// URLs, SHA-256 against the FIPS 180-2 vectors, and the Redis tier on a real redis-server (two
// caches sharing it, Redis killed and restarted under them).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "e2e/loopback.h"
#include "nexus/serve/cache.h"
#include "serve/redis_client.h"

namespace nexus::serve {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  ResponseCache::Clock fn() {
    return [this] { return now; };
  }
};

std::unique_ptr<ResponseCache> memory_cache(size_t bytes, std::chrono::milliseconds ttl,
                                            FakeClock& clock) {
  CacheOptions o;
  o.memory_bytes = bytes;
  o.ttl = ttl;
  auto c = ResponseCache::create(o, clock.fn());
  EXPECT_TRUE(c) << c.status().message();
  return std::move(c).value();
}

TEST(ResponseCache, Sha256MatchesTheStandardsVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string path = ::testing::TempDir() + "sha_vector.txt";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", f);
  std::fclose(f);
  Result<std::string> d = file_sha256_hex(path);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::filesystem::remove(path);
  EXPECT_FALSE(file_sha256_hex(path));
}

TEST(ResponseCache, KeepsTheMostRecentlyUsedWithinItsBytes) {
  FakeClock clock;
  // Each entry costs key + value + 96 bytes: three 100-byte values fit in 700, four do not.
  auto c = memory_cache(700, 60s, clock);
  const std::string v(100, 'x');
  c->put("a", v);
  c->put("b", v);
  c->put("c", v);
  CacheTier tier;
  ASSERT_TRUE(c->get("a", &tier));  // a is now the most recent; b the least
  EXPECT_EQ(tier, CacheTier::kMemory);
  c->put("d", v);
  EXPECT_FALSE(c->get("b", &tier));
  EXPECT_EQ(tier, CacheTier::kMiss);
  EXPECT_TRUE(c->get("a"));
  EXPECT_TRUE(c->get("c"));
  EXPECT_EQ(*c->get("d"), v);
  CacheStats s = c->stats();
  EXPECT_EQ(s.memory_entries, 3u);
  EXPECT_EQ(s.memory_bytes, 3u * (1 + 100 + 96));
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.stores, 4u);
  EXPECT_EQ(s.memory_hits, 4u);
  EXPECT_EQ(s.misses, 1u);
  // A value larger than the whole bound is not kept (and evicts nothing).
  c->put("huge", std::string(1000, 'y'));
  EXPECT_FALSE(c->get("huge"));
  EXPECT_EQ(c->stats().memory_entries, 3u);
  // Storing a key again replaces its value and its bytes.
  c->put("a", "short");
  EXPECT_EQ(*c->get("a"), "short");
  EXPECT_EQ(c->stats().memory_bytes, 2u * (1 + 100 + 96) + (1 + 5 + 96));
}

TEST(ResponseCache, EntriesExpireAfterTheirTtl) {
  FakeClock clock;
  auto c = memory_cache(1 << 20, 10s, clock);
  c->put("k", "v");
  clock.now += 9999ms;
  EXPECT_TRUE(c->get("k"));
  clock.now += 1ms;
  EXPECT_FALSE(c->get("k"));
  EXPECT_EQ(c->stats().expired, 1u);
  EXPECT_EQ(c->stats().memory_entries, 0u);
  EXPECT_EQ(c->stats().memory_bytes, 0u);
}

TEST(ResponseCache, BadOptionsAreRefused) {
  CacheOptions o;
  o.url = "http://localhost:6379";
  auto c = ResponseCache::create(o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.status().message().find("redis://"), std::string::npos) << c.status().message();
  o.url = "memory";
  o.memory_bytes = 0;
  EXPECT_FALSE(ResponseCache::create(o));
  o.memory_bytes = 1024;
  o.ttl = 0ms;
  EXPECT_FALSE(ResponseCache::create(o));
}

TEST(ResponseCache, RedisUrlsParse) {
  Result<RedisAddress> a = parse_redis_url("redis://cache.local");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "cache.local");
  EXPECT_EQ(a->port, 6379);
  EXPECT_EQ(a->db, 0);
  a = parse_redis_url("redis://:s3cret@127.0.0.1:6380/2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->password, "s3cret");
  EXPECT_EQ(a->db, 2);
  for (const char* bad : {"redis://", "redis://host:0", "redis://host:99999", "redis://host:x",
                          "redis://host/db", "rediss://host", "host:6379"}) {
    Result<RedisAddress> r = parse_redis_url(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
    }
  }
}

// A redis-server on a free loopback port, killed with SIGKILL when asked or at the end.
class RedisServer {
 public:
  explicit RedisServer(int port = 0) : port_(port ? port : free_port()) { start(); }
  ~RedisServer() { kill(); }
  int port() const { return port_; }
  bool start() {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      const int null = open("/dev/null", O_WRONLY);  // its start-up banner and warnings
      dup2(null, 1);
      dup2(null, 2);
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loglevel", "warning", nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // until it answers
      const int fd = test::connect_loopback(port_, 1000);
      if (fd >= 0) {
        close(fd);
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  static int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
  }
  int port_;
  pid_t pid_ = -1;
};

bool have_redis_server() { return std::system("command -v redis-server >/dev/null 2>&1") == 0; }

std::unique_ptr<ResponseCache> redis_cache(int port, size_t memory_bytes) {
  CacheOptions o;
  o.url = "redis://127.0.0.1:" + std::to_string(port);
  o.memory_bytes = memory_bytes;
  o.redis_retry = 200ms;
  auto c = ResponseCache::create(o);
  EXPECT_TRUE(c) << c.status().message();
  return std::move(c).value();
}

TEST(ResponseCacheRedis, ReplicasShareEntriesThroughRedis) {
  if (!have_redis_server()) GTEST_SKIP() << "needs redis-server (Debian's redis-server; make deps)";
  RedisServer redis;
  auto a = redis_cache(redis.port(), 1 << 20);
  auto b = redis_cache(redis.port(), 1 << 20);
  const std::string value = "{\"binary\":\"\\u0000\"}" + std::string(1, '\0') + "tail";
  a->put("key1", value);
  CacheTier tier;
  std::optional<std::string> got = b->get("key1", &tier);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, value);  // byte for byte, NUL included
  EXPECT_EQ(tier, CacheTier::kRedis);
  EXPECT_EQ(*b->get("key1", &tier), value);  // now in b's memory
  EXPECT_EQ(tier, CacheTier::kMemory);
  EXPECT_FALSE(b->get("other", &tier));
  EXPECT_EQ(tier, CacheTier::kMiss);
  CacheStats s = b->stats();
  EXPECT_TRUE(s.redis);
  EXPECT_TRUE(s.redis_up);
  EXPECT_EQ(s.redis_hits, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.redis_errors, 0u);
  EXPECT_GE(s.redis_calls, 2u);
  // Redis alone (no memory tier) answers every time from Redis.
  auto c = redis_cache(redis.port(), 0);
  EXPECT_EQ(*c->get("key1", &tier), value);
  EXPECT_EQ(*c->get("key1", &tier), value);
  EXPECT_EQ(tier, CacheTier::kRedis);
}

TEST(ResponseCacheRedis, ServesFromMemoryWhileRedisIsDownAndReconnects) {
  if (!have_redis_server()) GTEST_SKIP() << "needs redis-server (Debian's redis-server; make deps)";
  auto redis = std::make_unique<RedisServer>();
  const int port = redis->port();
  auto a = redis_cache(port, 1 << 20);
  auto b = redis_cache(port, 1 << 20);
  a->put("k", "v");
  ASSERT_TRUE(b->get("k"));  // b now holds a pooled connection
  redis->kill();
  // Down: lookups and stores fail fast, the memory tier still answers.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(a->get("absent"));
  a->put("k2", "v2");
  EXPECT_EQ(*a->get("k2"), "v2");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  CacheStats s = a->stats();
  EXPECT_FALSE(s.redis_up);
  EXPECT_EQ(s.redis_errors, 2u);
  // Back on the same port: after the retry pause a reconnects by itself, and b's stale pooled
  // connection is replaced without a failed lookup.
  redis = std::make_unique<RedisServer>(port);
  std::this_thread::sleep_for(250ms);
  a->put("k3", "v3");
  EXPECT_TRUE(a->stats().redis_up);
  CacheTier tier;
  EXPECT_EQ(*b->get("k3", &tier), "v3");
  EXPECT_EQ(tier, CacheTier::kRedis);
  EXPECT_EQ(b->stats().redis_errors, 0u);
}

}  // namespace
}  // namespace nexus::serve
