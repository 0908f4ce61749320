// The caching pool's bookkeeping on a host allocator with a byte budget standing in for a GPU:
// size rounding, reuse of freed blocks, no reuse of much larger ones, the in-use / reserved /
// peak figures, retry after emptying the cache when the device is full, and bad releases.
#include "core/caching_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "nexus/status.h"

namespace nexus {
namespace {

// A raw allocator with a budget: allocations past it fail, as cudaMalloc's do when the device is
// full.
struct Budget {
  explicit Budget(size_t bytes) : limit(bytes) {}
  size_t limit, used = 0;
  std::set<void*> live;
  std::map<void*, size_t> sizes;
  CachingPool::Raw raw() {
    return {[this](size_t n) -> void* {
              if (used + n > limit) return nullptr;
              void* p = std::malloc(n);
              used += n;
              live.insert(p);
              sizes[p] = n;
              return p;
            },
            [this](void* p) {
              used -= sizes.at(p);
              sizes.erase(p);
              live.erase(p);
              std::free(p);
            }};
  }
};

TEST(CachingPool, RoundsSizesToSteps) {
  EXPECT_EQ(CachingPool::round_size(0), 512u);
  EXPECT_EQ(CachingPool::round_size(1), 512u);
  EXPECT_EQ(CachingPool::round_size(512), 512u);
  EXPECT_EQ(CachingPool::round_size(513), 1024u);
  EXPECT_EQ(CachingPool::round_size(1u << 20), 1u << 20);
  EXPECT_EQ(CachingPool::round_size((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingPool::round_size(5u << 20), 6u << 20);
}

TEST(CachingPool, ReusesFreedBlocksAndCountsWhatItHolds) {
  Budget b{64u << 20};
  {
    CachingPool pool(b.raw());
    void* a = pool.allocate(1000);      // 1024
    void* c = pool.allocate(3u << 20);  // 4 MiB
    CachingPool::Stats s = pool.stats();
    EXPECT_EQ(s.in_use, 1024u + (4u << 20));
    EXPECT_EQ(s.reserved, s.in_use);
    EXPECT_EQ(s.raw_allocs, 2u);
    pool.release(a);
    pool.release(c);
    s = pool.stats();
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.reserved, 1024u + (4u << 20));  // cached, not given back
    EXPECT_EQ(s.peak_in_use, 1024u + (4u << 20));
    // The same sizes come back from the cache, with no raw allocation.
    void* a2 = pool.allocate(900);
    void* c2 = pool.allocate((3u << 20) + 5);
    EXPECT_EQ(a2, a);
    EXPECT_EQ(c2, c);
    s = pool.stats();
    EXPECT_EQ(s.raw_allocs, 2u);
    EXPECT_EQ(s.reuses, 2u);
    // A small request does not take the large cached block (more than a quarter too big).
    pool.release(c2);
    void* small = pool.allocate(2000);
    EXPECT_NE(small, c2);
    EXPECT_EQ(pool.stats().raw_allocs, 3u);
    pool.release(a2);
    pool.release(small);
    pool.empty_cache();
    s = pool.stats();
    EXPECT_EQ(s.reserved, 0u);
    EXPECT_EQ(s.raw_frees, 3u);
    EXPECT_TRUE(b.live.empty());
    EXPECT_EQ(s.peak_reserved, 1024u + (4u << 20) + 2048u);
  }
  EXPECT_EQ(b.used, 0u);
}

TEST(CachingPool, AFullDeviceGetsItsCacheBackBeforeFailing) {
  Budget b{10u << 20};
  CachingPool pool(b.raw());
  void* x = pool.allocate(4u << 20);
  void* y = pool.allocate(4u << 20);
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  pool.release(x);
  pool.release(y);
  // 8 MiB cached of a 10 MiB device: a 6 MiB request fits only once the cache is given back.
  void* z = pool.allocate(6u << 20);
  ASSERT_NE(z, nullptr);
  CachingPool::Stats s = pool.stats();
  EXPECT_EQ(s.cache_flushes, 1u);
  EXPECT_EQ(s.reserved, 6u << 20);
  EXPECT_EQ(s.in_use, 6u << 20);
  // Beyond the device: nullptr, not an exception.
  EXPECT_EQ(pool.allocate(8u << 20), nullptr);
  pool.release(z);
}

TEST(CachingPool, ReleasingAForeignPointerIsAnError) {
  Budget b{1u << 20};
  CachingPool pool(b.raw());
  int local = 0;
  EXPECT_THROW(pool.release(&local), Error);
  void* p = pool.allocate(10);
  pool.release(p);
  EXPECT_THROW(pool.release(p), Error);  // twice
  pool.release(nullptr);                 // like free(nullptr)
}

}  // namespace
}  // namespace nexus
