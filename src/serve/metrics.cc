// The Prometheus text format: # HELP and # TYPE lines, then samples; histograms as cumulative
// _bucket{le=...} series ending with +Inf, then _sum and _count.
#include "serve/metrics.h"

#include <cstdio>
#include <initializer_list>

namespace nexus::serve {
namespace {

const char* const kRoutes[] = {
    "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/search", "/v1/models",
    "/tokenize",       "/detokenize",          "/health",        "/metrics"};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const char* name, double v) {
  out += std::string(name) + " " + num(v) + "\n";
}

// A family of one unlabelled sample.
struct Scalar {
  const char* name;
  const char* type;
  const char* help;
  double value;
};

void scalars(std::string& out, std::initializer_list<Scalar> list) {
  for (const Scalar& m : list) {
    family(out, m.name, m.type, m.help);
    sample(out, m.name, m.value);
  }
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  family(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    out += std::string(name) + "_bucket{le=\"" + num(h.bounds[i]) + "\"} " + std::to_string(cum) +
           "\n";
  }
  out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  out += std::string(name) + "_sum " + num(h.sum) + "\n";
  out += std::string(name) + "_count " + std::to_string(h.count) + "\n";
}

}  // namespace

void RequestCounters::add(const std::string& path, int status) {
  std::string route = "other";
  for (const char* r : kRoutes)
    if (path == r) route = r;
  std::lock_guard lock(mu_);
  ++counts_[{route, status}];
}

std::map<std::pair<std::string, int>, uint64_t> RequestCounters::snapshot() const {
  std::lock_guard lock(mu_);
  return counts_;
}

namespace {

void cache_text(std::string& out, const CacheStats& c) {
  family(out, "nexus_cache_hits_total", "counter",
         "Response cache hits, by the tier that answered.");
  out += "nexus_cache_hits_total{tier=\"memory\"} " + std::to_string(c.memory_hits) + "\n";
  if (c.redis)
    out += "nexus_cache_hits_total{tier=\"redis\"} " + std::to_string(c.redis_hits) + "\n";
  scalars(out, {
                   {"nexus_cache_misses_total", "counter",
                    "Cacheable requests no tier could answer.", static_cast<double>(c.misses)},
                   {"nexus_cache_stores_total", "counter", "Responses stored in the cache.",
                    static_cast<double>(c.stores)},
                   {"nexus_cache_evictions_total", "counter",
                    "Entries the in-process tier dropped to stay within its size.",
                    static_cast<double>(c.evictions)},
                   {"nexus_cache_expired_total", "counter",
                    "Entries found past their TTL in the in-process tier.",
                    static_cast<double>(c.expired)},
                   {"nexus_cache_memory_entries", "gauge", "Entries in the in-process tier.",
                    static_cast<double>(c.memory_entries)},
                   {"nexus_cache_memory_bytes", "gauge",
                    "Bytes the in-process tier counts against its size.",
                    static_cast<double>(c.memory_bytes)},
               });
  if (!c.redis) return;
  scalars(out, {
                   {"nexus_cache_redis_up", "gauge", "1 while the last Redis command succeeded.",
                    c.redis_up ? 1.0 : 0.0},
                   {"nexus_cache_redis_errors_total", "counter",
                    "Redis lookups and stores that failed (the cache was bypassed).",
                    static_cast<double>(c.redis_errors)},
                   {"nexus_cache_redis_commands_total", "counter", "Redis commands sent.",
                    static_cast<double>(c.redis_calls)},
                   {"nexus_cache_redis_seconds_total", "counter",
                    "Time spent in Redis round trips.", c.redis_seconds},
               });
}

}  // namespace

std::string prometheus_text(const EngineStats* e, const RequestCounters& requests,
                            const CacheStats* cache) {
  std::string out;
  family(out, "nexus_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const auto& [key, n] : requests.snapshot())
    out += "nexus_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  if (cache != nullptr) cache_text(out, *cache);
  if (e == nullptr) return out;
  scalars(out,
          {
              {"nexus_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.",
               static_cast<double>(e->prompt_tokens)},
              {"nexus_generated_tokens_total", "counter", "Tokens generated.",
               static_cast<double>(e->generated_tokens)},
              {"nexus_queue_depth", "gauge", "Requests waiting for a sequence slot.",
               static_cast<double>(e->queue_depth)},
              {"nexus_running_sequences", "gauge", "Sequences being generated.",
               static_cast<double>(e->running)},
              {"nexus_kv_blocks_used", "gauge", "KV cache blocks held by sequences.",
               static_cast<double>(e->kv_blocks_used)},
              {"nexus_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.",
               static_cast<double>(e->kv_blocks_total)},
              {"nexus_preemptions_total", "counter",
               "Sequences preempted (blocks freed, recomputed later) when the KV pool ran out.",
               static_cast<double>(e->preemptions)},
              {"nexus_prefix_cache_lookups_total", "counter",
               "Requests that looked for a cached prefix of their tokens.",
               static_cast<double>(e->prefix_lookups)},
              {"nexus_prefix_cache_hits_total", "counter",
               "Requests that started from a cached prefix's KV blocks.",
               static_cast<double>(e->prefix_hits)},
              {"nexus_prefix_cache_tokens_total", "counter",
               "Prompt tokens taken from cached prefixes instead of computed.",
               static_cast<double>(e->prefix_tokens)},
              {"nexus_state_snapshot_restores_total", "counter",
               "Prefix-cache hits that started from a snapshot of a recurrent state.",
               static_cast<double>(e->state_restores)},
              {"nexus_state_snapshot_bytes", "gauge",
               "Bytes of recurrent-state snapshots held for the prefix cache.",
               static_cast<double>(e->state_snapshot_bytes)},
              {"nexus_speculative_drafted_tokens_total", "counter",
               "Draft tokens verified (prompt lookup or a draft model).",
               static_cast<double>(e->spec_drafted)},
              {"nexus_speculative_accepted_tokens_total", "counter",
               "Draft tokens accepted; their ratio to the drafted ones is the acceptance rate.",
               static_cast<double>(e->spec_accepted)},
              {"nexus_engine_steps_total", "counter", "Batched forward passes run.",
               static_cast<double>(e->steps)},
          });
  if (!e->memory.empty()) {
    const struct {
      const char* name;
      const char* help;
      double LayerMemoryStats::*field;
    } mem[] = {{"nexus_memory_written",
                "nexus-ltm: mass written to a layer's long-term memory "
                "per head, mean over the running sequences.",
                &LayerMemoryStats::written},
               {"nexus_memory_slots_used_ratio",
                "nexus-ltm: share of a layer's memory slots holding 90% of its mass.",
                &LayerMemoryStats::slots_used},
               {"nexus_memory_norm", "nexus-ltm: a layer's long-term memory's norm per head.",
                &LayerMemoryStats::norm}};
    for (const auto& m : mem) {
      family(out, m.name, "gauge", m.help);
      for (const LayerMemoryStats& l : e->memory)
        out += std::string(m.name) + "{layer=\"" + std::to_string(l.layer) + "\"} " +
               std::to_string(l.*(m.field)) + "\n";
    }
  }
  family(out, "nexus_finished_total", "counter", "Generations finished, by reason.");
  const std::pair<const char*, uint64_t> finished[] = {{"stop", e->finished_stop},
                                                       {"length", e->finished_length},
                                                       {"cancelled", e->finished_cancelled},
                                                       {"error", e->finished_error}};
  for (const auto& [reason, n] : finished)
    out += std::string("nexus_finished_total{reason=\"") + reason + "\"} " + std::to_string(n) + "\n";
  histogram(out, "nexus_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.", e->ttft);
  histogram(out, "nexus_inter_token_seconds", "Between consecutive tokens of a request.",
            e->inter_token);
  histogram(out, "nexus_request_duration_seconds", "From a request's arrival to its end.", e->e2e);
  return out;
}

}  // namespace nexus::serve
