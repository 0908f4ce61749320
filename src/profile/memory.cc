// Named live-buffer registry and the memory section of the profiler's summary.
#include "profile/memory.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

namespace nexus::profile {
namespace {

struct BufferRegistry {
  std::mutex mu;
  std::unordered_map<const void*, LiveBuffer> buffers;
};

// Never destroyed: buffers may be untracked during static destruction.
BufferRegistry& buffers() {
  static BufferRegistry* r = new BufferRegistry;
  return *r;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

void track_buffer(const void* ptr, size_t bytes, MemCategory cat, std::string name) {
  if (ptr == nullptr) return;
  BufferRegistry& r = buffers();
  std::lock_guard<std::mutex> lock(r.mu);
  r.buffers[ptr] = LiveBuffer{ptr, bytes, cat, std::move(name)};
}

void untrack_buffer(const void* ptr) {
  BufferRegistry& r = buffers();
  std::lock_guard<std::mutex> lock(r.mu);
  r.buffers.erase(ptr);
}

std::vector<LiveBuffer> largest_live_buffers(size_t n) {
  std::vector<LiveBuffer> out;
  {
    BufferRegistry& r = buffers();
    std::lock_guard<std::mutex> lock(r.mu);
    out.reserve(r.buffers.size());
    for (const auto& [ptr, b] : r.buffers) out.push_back(b);
  }
  const auto larger = [](const LiveBuffer& a, const LiveBuffer& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  };
  const size_t k = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(), larger);
  out.resize(k);
  return out;
}

std::string memory_report(size_t n_largest) {
  const MemStats m = mem_stats();
  std::string out = "memory (counted allocations; peak since process start)\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-14s %14s %14s\n", "category", "current MiB", "peak MiB");
  out += line;
  for (int c = 0; c < static_cast<int>(MemCategory::kCount); ++c) {
    std::snprintf(line, sizeof(line), "  %-14s %14.2f %14.2f\n",
                  std::string(mem_category_name(static_cast<MemCategory>(c))).c_str(),
                  mib(m.current[c]), mib(m.peak[c]));
    out += line;
  }
  std::snprintf(line, sizeof(line), "  %-14s %14.2f %14.2f\n", "total", mib(m.total_current),
                mib(m.total_peak));
  out += line;
  if (const size_t rss = peak_rss_bytes(); rss > 0) {
    std::snprintf(line, sizeof(line), "  peak RSS %.2f MiB\n", mib(rss));
    out += line;
  }
  const std::vector<LiveBuffer> largest = largest_live_buffers(n_largest);
  if (!largest.empty()) {
    out += "largest live buffers\n";
    for (const LiveBuffer& b : largest) {
      std::snprintf(line, sizeof(line), "  %12.2f MiB  %-12s ", mib(b.bytes),
                    std::string(mem_category_name(b.cat)).c_str());
      out += line;
      out += b.name;
      out += '\n';
    }
  }
  return out;
}

}  // namespace nexus::profile
