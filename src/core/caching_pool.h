// A caching pool over a device's raw allocator. cudaMalloc and cudaFree are slow and synchronise
// the device, so freed blocks are kept and handed out again to requests of about their size; when
// the raw allocator fails, the cached blocks are given back and the request tried once more.
// Device-agnostic (the raw functions are passed in), so its bookkeeping is tested on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace nexus {

class CachingPool {
 public:
  struct Raw {
    std::function<void*(size_t)> alloc;  // nullptr when out of memory
    std::function<void(void*)> free;
  };
  struct Stats {
    size_t in_use = 0;    // bytes of blocks handed out (their rounded sizes)
    size_t reserved = 0;  // bytes taken from the raw allocator: in use plus cached
    size_t peak_in_use = 0, peak_reserved = 0;
    uint64_t raw_allocs = 0, raw_frees = 0;
    uint64_t reuses = 0;         // requests answered from the cache
    uint64_t cache_flushes = 0;  // times the cache was emptied to retry a failed raw allocation
  };

  explicit CachingPool(Raw raw);
  // Gives the cached blocks back; blocks still handed out are their owners' (not freed here).
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A block of at least `bytes`; nullptr when the device has no room even with the cache emptied.
  void* allocate(size_t bytes);
  // Back to the cache. Throws nexus::Error for a pointer this pool did not hand out.
  void release(void* p);
  // Gives every cached block back to the raw allocator.
  void empty_cache();
  Stats stats() const;

  // The size a request is rounded to: 512-byte steps up to 1 MiB, 2 MiB steps above, so that
  // requests of nearby sizes share blocks.
  static size_t round_size(size_t bytes);

 private:
  void* take_cached(size_t size);  // under mu_
  void flush();                    // under mu_

  Raw raw_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cached_;       // size -> block
  std::unordered_map<void*, size_t> in_use_;  // block -> size
  Stats stats_;
};

}  // namespace nexus
