// Aligned allocation with byte accounting (current and peak, in total and by category), plus a
// bump arena for per-forward scratch so hot paths never call malloc.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>

#include "nexus/device.h"

namespace nexus {

enum class MemCategory { kWeights, kKvCache, kActivations, kOptimizer, kScratch, kCount };
std::string_view mem_category_name(MemCategory c);

struct MemStats {
  size_t current[static_cast<int>(MemCategory::kCount)] = {};
  size_t peak[static_cast<int>(MemCategory::kCount)] = {};
  size_t total_current = 0;
  size_t total_peak = 0;
  // Bytes by device type (DeviceType as index): the host's equal total_current/total_peak; a
  // device's are counted here only, not in the categories above (those are host memory).
  size_t device_current[kDeviceTypes] = {};
  size_t device_peak[kDeviceTypes] = {};
};

// Snapshot of the global accounting.
MemStats mem_stats();
// Counts `bytes` of device memory (not the host's: aligned_alloc_counted counts those) allocated
// (`add`) or given back under `cat`.
void mem_account(DeviceType device, MemCategory cat, size_t bytes, bool add);
// Peak resident set size of the process in bytes (from the OS), 0 if unknown.
size_t peak_rss_bytes();

constexpr size_t kAlignment = 64;

// 64-byte aligned memory, counted under `cat`; throws nexus::Error naming the size on failure.
void* aligned_alloc_counted(size_t bytes, MemCategory cat);
void aligned_free_counted(void* p, size_t bytes, MemCategory cat);
// Same, owned by a shared_ptr (frees and un-counts on release).
std::shared_ptr<void> aligned_shared(size_t bytes, MemCategory cat);

// Bump allocator over one aligned block; reset() makes all of it free again.
class Arena {
 public:
  Arena() = default;
  Arena(size_t capacity, MemCategory cat);
  ~Arena();
  Arena(Arena&& o) noexcept;
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `bytes` of 64-byte aligned scratch; throws when the arena is exhausted.
  void* alloc(size_t bytes);
  template <typename T>
  T* alloc_n(size_t n) { return static_cast<T*>(alloc(n * sizeof(T))); }
  void reset() { used_ = 0; }
  // Gives back everything allocated since used() returned `mark`.
  void rewind(size_t mark) { used_ = mark < used_ ? mark : used_; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  const void* base() const { return base_; }

 private:
  uint8_t* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  MemCategory cat_ = MemCategory::kScratch;
};

}  // namespace nexus
