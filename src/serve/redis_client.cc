// hiredis's blocking API, one command per pooled connection at a time. A failed command or
// connection drops every pooled connection (they all lead to the same server) and starts the
// pause before the next attempt.
#include "serve/redis_client.h"

#include <hiredis.h>
#include <sys/time.h>

#include <charconv>
#include <cstring>

namespace nexus::serve {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

bool parse_int(std::string_view s, int lo, int hi, int* out) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A reply's error text, or empty when it is not an error.
std::string reply_error(const redisContext* c, const redisReply* r) {
  if (r == nullptr) return c->errstr[0] ? c->errstr : "no reply";
  if (r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  return "";
}

}  // namespace

Result<RedisAddress> parse_redis_url(std::string_view url) {
  const std::string_view scheme = "redis://";
  if (url.substr(0, scheme.size()) != scheme)
    return Status::error("'" + std::string(url) + "' is not a redis://HOST[:PORT][/DB] URL");
  std::string_view rest = url.substr(scheme.size());
  RedisAddress a;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view auth = rest.substr(0, at);
    if (!auth.empty() && auth[0] == ':') auth.remove_prefix(1);  // redis://:PASSWORD@host
    a.password = std::string(auth);
    rest = rest.substr(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &a.db))
      return Status::error("'" + std::string(url) + "': the database '" + std::string(db) +
                           "' is not a number");
    rest = rest.substr(0, slash);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    const std::string_view port = rest.substr(colon + 1);
    if (!parse_int(port, 1, 65535, &a.port))
      return Status::error("'" + std::string(url) + "': the port '" + std::string(port) +
                           "' is not in [1, 65535]");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return Status::error("'" + std::string(url) + "' names no host");
  a.host = std::string(rest);
  return a;
}

RedisClient::RedisClient(RedisAddress address, std::chrono::milliseconds timeout,
                         std::chrono::milliseconds retry_after)
    : address_(std::move(address)), timeout_(timeout), retry_after_(retry_after) {}

RedisClient::~RedisClient() {
  for (redisContext* c : idle_) redisFree(c);
}

redisContext* RedisClient::acquire(std::string* error, bool* pooled) {
  *pooled = false;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      redisContext* c = idle_.back();
      idle_.pop_back();
      *pooled = true;
      return c;
    }
    if (!up_ && std::chrono::steady_clock::now() < next_try_) {
      *error = "redis at " + address_.host + ":" + std::to_string(address_.port) +
               " is down; retrying shortly";
      return nullptr;
    }
  }
  redisContext* c =
      redisConnectWithTimeout(address_.host.c_str(), address_.port, to_timeval(timeout_));
  auto fail = [&](std::string why) -> redisContext* {
    *error = "redis at " + address_.host + ":" + std::to_string(address_.port) + ": " + why;
    if (c != nullptr) redisFree(c);
    release(nullptr, true);
    return nullptr;
  };
  if (c == nullptr) return fail("cannot allocate a connection");
  if (c->err) return fail(c->errstr);
  redisSetTimeout(c, to_timeval(timeout_));
  if (!address_.password.empty()) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", address_.password.c_str()));
    const std::string e = reply_error(c, r);
    if (r != nullptr) freeReplyObject(r);
    if (!e.empty()) return fail("AUTH: " + e);
  }
  if (address_.db != 0) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "SELECT %d", address_.db));
    const std::string e = reply_error(c, r);
    if (r != nullptr) freeReplyObject(r);
    if (!e.empty()) return fail("SELECT " + std::to_string(address_.db) + ": " + e);
  }
  return c;
}

void RedisClient::release(redisContext* c, bool broken) {
  std::vector<redisContext*> drop;
  {
    std::lock_guard lock(mu_);
    if (broken) {
      up_ = false;
      next_try_ = std::chrono::steady_clock::now() + retry_after_;
      drop.swap(idle_);
      if (c != nullptr) drop.push_back(c);
    } else {
      up_ = true;
      idle_.push_back(c);
    }
  }
  for (redisContext* d : drop) redisFree(d);
}

Result<std::optional<std::string>> RedisClient::command(const char* name,
                                                        std::vector<std::string_view> args) {
  std::vector<const char*> argv{name};
  std::vector<size_t> lens{std::strlen(name)};
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  for (int attempt = 0;; ++attempt) {
    std::string error;
    bool pooled = false;
    redisContext* c = acquire(&error, &pooled);
    if (c == nullptr) return Status::error(error);
    const auto t0 = std::chrono::steady_clock::now();
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mu_);
      ++calls_;
      seconds_ += dt;
    }
    if (r == nullptr) {  // the connection broke; an error reply leaves it usable
      error = c->errstr[0] ? c->errstr : "no reply";
      if (pooled && attempt == 0) {  // the other pooled connections are as stale
        std::vector<redisContext*> stale{c};
        {
          std::lock_guard lock(mu_);
          stale.insert(stale.end(), idle_.begin(), idle_.end());
          idle_.clear();
        }
        for (redisContext* d : stale) redisFree(d);
        continue;
      }
      release(c, true);
      return Status::error("redis " + std::string(name) + ": " + error);
    }
    const std::string e = reply_error(c, r);
    std::optional<std::string> value;
    if (e.empty() && r->type == REDIS_REPLY_STRING) value = std::string(r->str, r->len);
    freeReplyObject(r);
    release(c, false);
    if (!e.empty()) return Status::error("redis " + std::string(name) + ": " + e);
    return value;
  }
}

Result<std::optional<std::string>> RedisClient::get(std::string_view key) {
  return command("GET", {key});
}

Status RedisClient::set(std::string_view key, std::string_view value,
                        std::chrono::milliseconds ttl) {
  const std::string px = std::to_string(ttl.count());
  Result<std::optional<std::string>> r = command("SET", {key, value, "PX", px});
  return r ? Status::ok() : r.status();
}

bool RedisClient::up() const {
  std::lock_guard lock(mu_);
  return up_;
}

uint64_t RedisClient::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

double RedisClient::seconds() const {
  std::lock_guard lock(mu_);
  return seconds_;
}

}  // namespace nexus::serve
