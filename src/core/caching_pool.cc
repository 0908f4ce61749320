// Blocks are never split: a cached block serves a request of its rounded size up to a quarter
// smaller (so a large block is not spent on a small request), and the whole block counts as in use.
#include "core/caching_pool.h"

#include <algorithm>

#include "nexus/status.h"

namespace nexus {

CachingPool::CachingPool(Raw raw) : raw_(std::move(raw)) {}

CachingPool::~CachingPool() {
  std::lock_guard lock(mu_);
  flush();
}

size_t CachingPool::round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = 2u << 20, kLimit = 1u << 20;
  if (bytes == 0) return kSmall;
  if (bytes <= kLimit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

void* CachingPool::take_cached(size_t size) {
  auto it = cached_.lower_bound(size);
  if (it == cached_.end() || it->first > size + size / 4) return nullptr;
  void* p = it->second;
  in_use_.emplace(p, it->first);
  stats_.in_use += it->first;
  cached_.erase(it);
  ++stats_.reuses;
  return p;
}

void CachingPool::flush() {
  for (const auto& [size, p] : cached_) {
    raw_.free(p);
    stats_.reserved -= size;
    ++stats_.raw_frees;
  }
  cached_.clear();
}

void* CachingPool::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard lock(mu_);
  void* p = take_cached(size);
  if (p == nullptr) {
    p = raw_.alloc(size);
    if (p == nullptr && !cached_.empty()) {  // out of memory: give the cache back and retry
      flush();
      ++stats_.cache_flushes;
      p = raw_.alloc(size);
    }
    if (p == nullptr) return nullptr;
    ++stats_.raw_allocs;
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    in_use_.emplace(p, size);
    stats_.in_use += size;
  }
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void CachingPool::release(void* p) {
  if (p == nullptr) return;
  std::lock_guard lock(mu_);
  auto it = in_use_.find(p);
  NEXUS_CHECK(it != in_use_.end(), "[caching_pool] release of a block the pool did not hand out");
  stats_.in_use -= it->second;
  cached_.emplace(it->second, p);
  in_use_.erase(it);
}

void CachingPool::empty_cache() {
  std::lock_guard lock(mu_);
  flush();
}

CachingPool::Stats CachingPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace nexus
