// The Prometheus text format: # HELP and # TYPE lines, then samples; histograms as cumulative
// _bucket{le=...} series ending with +Inf, then _sum and _count.
#include "serve/metrics.h"

#include <cstdio>

namespace nexus::serve {
namespace {

const char* const kRoutes[] = {"/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/models",
                               "/tokenize",       "/detokenize",          "/health",
                               "/metrics"};

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

std::string prometheus_text(const EngineStats* e, const RequestCounters& requests) {
  std::string out;
  family(out, "nexus_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const auto& [key, n] : requests.snapshot())
    out += "nexus_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  if (e == nullptr) return out;
  family(out, "nexus_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.");
  sample(out, "nexus_prompt_tokens_total", static_cast<double>(e->prompt_tokens));
  family(out, "nexus_generated_tokens_total", "counter", "Tokens generated.");
  sample(out, "nexus_generated_tokens_total", static_cast<double>(e->generated_tokens));
  family(out, "nexus_finished_total", "counter", "Generations finished, by reason.");
  out += "nexus_finished_total{reason=\"stop\"} " + std::to_string(e->finished_stop) + "\n";
  out += "nexus_finished_total{reason=\"length\"} " + std::to_string(e->finished_length) + "\n";
  out += "nexus_finished_total{reason=\"cancelled\"} " + std::to_string(e->finished_cancelled) +
         "\n";
  out += "nexus_finished_total{reason=\"error\"} " + std::to_string(e->finished_error) + "\n";
  family(out, "nexus_queue_depth", "gauge", "Requests waiting for a sequence slot.");
  sample(out, "nexus_queue_depth", static_cast<double>(e->queue_depth));
  family(out, "nexus_running_sequences", "gauge", "Sequences being generated.");
  sample(out, "nexus_running_sequences", static_cast<double>(e->running));
  family(out, "nexus_kv_blocks_used", "gauge", "KV cache blocks held by sequences.");
  sample(out, "nexus_kv_blocks_used", static_cast<double>(e->kv_blocks_used));
  family(out, "nexus_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.");
  sample(out, "nexus_kv_blocks_capacity", static_cast<double>(e->kv_blocks_total));
  family(out, "nexus_preemptions_total", "counter",
         "Sequences preempted (blocks freed, recomputed later) when the KV pool ran out.");
  sample(out, "nexus_preemptions_total", static_cast<double>(e->preemptions));
  family(out, "nexus_prefix_cache_lookups_total", "counter",
         "Requests that looked for a cached prefix of their tokens.");
  sample(out, "nexus_prefix_cache_lookups_total", static_cast<double>(e->prefix_lookups));
  family(out, "nexus_prefix_cache_hits_total", "counter",
         "Requests that started from a cached prefix's KV blocks.");
  sample(out, "nexus_prefix_cache_hits_total", static_cast<double>(e->prefix_hits));
  family(out, "nexus_prefix_cache_tokens_total", "counter",
         "Prompt tokens taken from cached prefixes instead of computed.");
  sample(out, "nexus_prefix_cache_tokens_total", static_cast<double>(e->prefix_tokens));
  family(out, "nexus_speculative_drafted_tokens_total", "counter",
         "Draft tokens verified (prompt lookup speculation).");
  sample(out, "nexus_speculative_drafted_tokens_total", static_cast<double>(e->spec_drafted));
  family(out, "nexus_speculative_accepted_tokens_total", "counter",
         "Draft tokens accepted; their ratio to the drafted ones is the acceptance rate.");
  sample(out, "nexus_speculative_accepted_tokens_total", static_cast<double>(e->spec_accepted));
  family(out, "nexus_engine_steps_total", "counter", "Batched forward passes run.");
  sample(out, "nexus_engine_steps_total", static_cast<double>(e->steps));
  histogram(out, "nexus_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.", e->ttft);
  histogram(out, "nexus_inter_token_seconds", "Between consecutive tokens of a request.",
            e->inter_token);
  histogram(out, "nexus_request_duration_seconds", "From a request's arrival to its end.", e->e2e);
  return out;
}

}  // namespace nexus::serve
