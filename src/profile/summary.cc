// Aggregation of recorded spans by name (calls, total and self time, bytes, flops) and the text
// summary table printed by `nexus run --profile-summary`.
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "profile/memory.h"
#include "profile/recorder.h"

namespace nexus::profile {
namespace {

constexpr size_t kLargestBuffers = 8;

// Aggregates a snapshot. Self time comes from replaying each thread's spans (sorted by start,
// parents before children) against a stack of the spans still open.
Stats aggregate(const Snapshot& s) {
  Stats st;
  st.wall_ns = s.wall_ns;
  st.dropped = s.dropped;
  std::unordered_map<std::string, size_t> index;  // category letter + name -> st.spans index
  struct Open {
    int64_t end_ns;
    size_t slot;
    int64_t dur_ns;
    int64_t child_ns;
  };
  std::vector<Open> stack;
  const auto close_top = [&] {
    const Open& o = stack.back();
    st.spans[o.slot].self_ns += o.dur_ns - o.child_ns;
    stack.pop_back();
  };
  for (const ThreadEvents& t : s.threads) {
    ++st.n_threads;
    for (const Event& e : t.events) {
      if (e.cat == Category::kCounter) {
        ++st.n_counters;
        continue;
      }
      ++st.n_spans;
      const std::string name = e.name ? e.name : "";
      std::string key(1, static_cast<char>('0' + static_cast<int>(e.cat)));
      key += name;
      auto [it, added] = index.try_emplace(key, st.spans.size());
      if (added) {
        st.spans.emplace_back();
        st.spans.back().name = name;
        st.spans.back().cat = e.cat;
      }
      SpanStats& a = st.spans[it->second];
      const int64_t dur = e.end_ns - e.start_ns;
      ++a.calls;
      a.total_ns += dur;
      a.max_ns = std::max(a.max_ns, dur);
      a.bytes += std::max<int64_t>(0, e.bytes);
      a.flops += std::max<int64_t>(0, e.flops);
      while (!stack.empty() && stack.back().end_ns <= e.start_ns) close_top();
      if (!stack.empty()) stack.back().child_ns += dur;
      stack.push_back({e.end_ns, it->second, dur, 0});
    }
    while (!stack.empty()) close_top();
  }
  std::sort(st.spans.begin(), st.spans.end(), [](const SpanStats& a, const SpanStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return st;
}

std::string fit(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  return name.substr(0, width - 3) + "...";
}

}  // namespace

Stats stats() { return aggregate(snapshot()); }

std::string summary_table() {
  const Stats st = stats();
  const double wall_ms = static_cast<double>(st.wall_ns) / 1e6;
  const auto share = [&](int64_t ns) {
    return st.wall_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(st.wall_ns) : 0.0;
  };
  size_t width = 20;
  for (const SpanStats& a : st.spans) width = std::max(width, std::min<size_t>(40, a.name.size()));
  const int w = static_cast<int>(width);
  char line[512];
  std::string out;
  std::snprintf(line, sizeof(line),
                "profile: %.3f ms profiled, %d thread%s, %lld spans, %lld counter samples\n",
                wall_ms, st.n_threads, st.n_threads == 1 ? "" : "s",
                static_cast<long long>(st.n_spans), static_cast<long long>(st.n_counters));
  out += line;
  if (st.dropped > 0) {
    std::snprintf(line, sizeof(line), "warning: %llu events dropped (a thread buffer was full)\n",
                  static_cast<unsigned long long>(st.dropped));
    out += line;
  }

  // Phases: nested stretches of work, so self time says where time is not covered by children.
  std::snprintf(line, sizeof(line), "\n%-*s %8s %11s %11s %11s %7s\n", w, "phase", "calls",
                "total ms", "self ms", "mean us", "% wall");
  out += line;
  for (const SpanStats& a : st.spans) {
    if (a.cat != Category::kPhase) continue;
    std::snprintf(line, sizeof(line), "%-*s %8lld %11.3f %11.3f %11.2f %7.1f\n", w,
                  fit(a.name, width).c_str(), static_cast<long long>(a.calls), a.total_ns / 1e6,
                  a.self_ns / 1e6, a.total_ns / 1e3 / static_cast<double>(a.calls),
                  share(a.total_ns));
    out += line;
  }

  // Ops: one kernel call each; achieved bandwidth and compute where the call gave its counts.
  std::snprintf(line, sizeof(line), "\n%-*s %8s %11s %11s %7s %9s %9s\n", w, "op", "calls",
                "total ms", "mean us", "% wall", "GB/s", "GFLOP/s");
  out += line;
  int64_t op_ns = 0;
  for (const SpanStats& a : st.spans) {
    if (a.cat != Category::kOp) continue;
    op_ns += a.self_ns;
    const double secs = static_cast<double>(a.total_ns) / 1e9;
    char gbs[16] = "-", gflops[16] = "-";
    if (a.bytes > 0 && secs > 0) std::snprintf(gbs, sizeof(gbs), "%.2f", a.bytes / secs / 1e9);
    if (a.flops > 0 && secs > 0)
      std::snprintf(gflops, sizeof(gflops), "%.2f", a.flops / secs / 1e9);
    std::snprintf(line, sizeof(line), "%-*s %8lld %11.3f %11.2f %7.1f %9s %9s\n", w,
                  fit(a.name, width).c_str(), static_cast<long long>(a.calls), a.total_ns / 1e6,
                  a.total_ns / 1e3 / static_cast<double>(a.calls), share(a.total_ns), gbs, gflops);
    out += line;
  }
  std::snprintf(line, sizeof(line), "%-*s %8s %11.3f %11s %7.1f  (self time of all ops)\n", w,
                "all ops", "", op_ns / 1e6, "", share(op_ns));
  out += line;
  out += '\n';
  out += memory_report(kLargestBuffers);
  return out;
}

}  // namespace nexus::profile
