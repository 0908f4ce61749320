// Memory side of the profiler: an optional registry of named live buffers (weights, KV cache,
// arenas) so the report can list the largest, and the memory section of the summary table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nexus/core/allocator.h"

namespace nexus::profile {

struct LiveBuffer {
  const void* ptr = nullptr;
  size_t bytes = 0;
  MemCategory cat = MemCategory::kScratch;
  std::string name;
};

// Remembers that `ptr` holds `bytes` under `name` until untrack_buffer(ptr). Works whether or not
// profiling is on (buffers are usually made before it starts); re-tracking a pointer replaces it.
void track_buffer(const void* ptr, size_t bytes, MemCategory cat, std::string name);
void untrack_buffer(const void* ptr);
// The n largest tracked buffers, largest first.
std::vector<LiveBuffer> largest_live_buffers(size_t n);

// RAII form of track_buffer / untrack_buffer for a buffer with a matching lifetime.
class TrackedBuffer {
 public:
  TrackedBuffer(const void* ptr, size_t bytes, MemCategory cat, std::string name) : ptr_(ptr) {
    track_buffer(ptr, bytes, cat, std::move(name));
  }
  ~TrackedBuffer() { untrack_buffer(ptr_); }
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;

 private:
  const void* ptr_;
};

// Current and peak bytes by category (mem_stats()), peak RSS and the n largest live buffers, as
// the text that ends summary_table().
std::string memory_report(size_t n_largest);

}  // namespace nexus::profile
