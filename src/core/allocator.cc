// Counting aligned allocator and bump arena.
#include "nexus/core/allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>

#include "nexus/status.h"

namespace nexus {
namespace {

std::mutex g_mu;
MemStats g_stats;

void count(MemCategory cat, size_t bytes, bool add) {
  std::lock_guard<std::mutex> lock(g_mu);
  const int c = static_cast<int>(cat);
  constexpr int kHost = static_cast<int>(DeviceType::kCpu);
  if (add) {
    g_stats.current[c] += bytes;
    g_stats.total_current += bytes;
    if (g_stats.current[c] > g_stats.peak[c]) g_stats.peak[c] = g_stats.current[c];
    if (g_stats.total_current > g_stats.total_peak) g_stats.total_peak = g_stats.total_current;
  } else {
    g_stats.current[c] -= bytes;
    g_stats.total_current -= bytes;
  }
  g_stats.device_current[kHost] = g_stats.total_current;
  g_stats.device_peak[kHost] = g_stats.total_peak;
}

}  // namespace

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights: return "weights";
    case MemCategory::kKvCache: return "kv_cache";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kOptimizer: return "optimizer";
    case MemCategory::kScratch: return "scratch";
    default: return "?";
  }
}

void mem_account(DeviceType device, MemCategory cat, size_t bytes, bool add) {
  if (device == DeviceType::kCpu) return count(cat, bytes, add);
  std::lock_guard<std::mutex> lock(g_mu);
  const int d = static_cast<int>(device);
  if (add) {
    g_stats.device_current[d] += bytes;
    if (g_stats.device_current[d] > g_stats.device_peak[d])
      g_stats.device_peak[d] = g_stats.device_current[d];
  } else {
    g_stats.device_current[d] -= bytes;
  }
}

MemStats mem_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

size_t peak_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

void* aligned_alloc_counted(size_t bytes, MemCategory cat) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr)
    throw Error("[alloc] out of memory allocating " + std::to_string(bytes) + " bytes for " +
                std::string(mem_category_name(cat)));
  count(cat, bytes, true);
  return p;
}

void aligned_free_counted(void* p, size_t bytes, MemCategory cat) {
  if (p == nullptr) return;
  std::free(p);
  count(cat, bytes, false);
}

std::shared_ptr<void> aligned_shared(size_t bytes, MemCategory cat) {
  void* p = aligned_alloc_counted(bytes, cat);
  return std::shared_ptr<void>(p, [bytes, cat](void* q) { aligned_free_counted(q, bytes, cat); });
}

Arena::Arena(size_t capacity, MemCategory cat)
    : base_(static_cast<uint8_t*>(aligned_alloc_counted(capacity, cat))),
      capacity_(capacity),
      cat_(cat) {}

Arena::~Arena() { aligned_free_counted(base_, capacity_, cat_); }

Arena::Arena(Arena&& o) noexcept
    : base_(o.base_), capacity_(o.capacity_), used_(o.used_), cat_(o.cat_) {
  o.base_ = nullptr;
  o.capacity_ = o.used_ = 0;
}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    aligned_free_counted(base_, capacity_, cat_);
    base_ = o.base_;
    capacity_ = o.capacity_;
    used_ = o.used_;
    cat_ = o.cat_;
    o.base_ = nullptr;
    o.capacity_ = o.used_ = 0;
  }
  return *this;
}

void* Arena::alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (used_ + rounded > capacity_)
    throw Error("[arena] exhausted: need " + std::to_string(bytes) + " bytes, " +
                std::to_string(capacity_ - used_) + " of " + std::to_string(capacity_) + " free");
  void* p = base_ + used_;
  used_ += rounded;
  return p;
}

}  // namespace nexus
