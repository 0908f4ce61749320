// /metrics in the Prometheus text exposition format (version 0.0.4): HTTP requests by route and
// status, the response cache's hits and misses, and the engine's tokens, queue, sequences, KV
// blocks, preemptions and latency histograms.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "nexus/serve/cache.h"
#include "nexus/serve/engine.h"

namespace nexus::serve {

// Requests answered, by route (known routes only; the rest count as "other") and status.
class RequestCounters {
 public:
  void add(const std::string& path, int status);
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
};

// The exposition text; `engine` null while the model loads (only the request counters then),
// `cache` null when the server has no response cache.
std::string prometheus_text(const EngineStats* engine, const RequestCounters& requests,
                            const CacheStats* cache = nullptr);

}  // namespace nexus::serve
