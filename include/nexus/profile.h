// Profiler: scoped spans (ops and phases), counters and memory samples recorded per thread, written
// as a Chrome trace (Perfetto, chrome://tracing) or summarised as a table. Off by default; a scope
// then costs one predictable branch on a global flag, with no allocation and no formatting.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"

namespace nexus::profile {

// What a span measures: one kernel call (op) or a stretch of work made of ops (phase).
enum class Category : uint8_t { kOp, kPhase, kCounter };
// "op", "phase" or "counter" (the "cat" field of the trace).
std::string_view category_name(Category c);

namespace detail {
extern std::atomic<bool> g_enabled;
void record_counter(const char* name, double value);
}  // namespace detail

// True between start() and stop(). Relaxed load: spans that begin just before stop() still end.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Starts recording (also samples memory). Events accumulate across start/stop pairs until reset().
void start();
// Stops recording (samples memory first). Spans already open still complete.
void stop();
// Discards all recorded events, counters and memory samples. Each thread drops its old events the
// next time it records, so this is safe while other threads record; spans open across a reset()
// are dropped. Do not call it while write_chrome_trace() or stats() runs.
void reset();

// Records the value of a counter (a Chrome-trace "C" event). `name` must outlive the profile (use a
// string literal). Nothing happens while profiling is off.
inline void counter(const char* name, double value) {
  if (enabled()) detail::record_counter(name, value);
}
// Records the current bytes of every memory category (core/allocator.h) as one "memory"
// counter sample. Done automatically at start(), stop() and the begin and end of every top-level
// phase span (no recorded span open around it on its thread). No-op while profiling is off.
void sample_memory();

// Names the calling thread in the trace (default: "main" for the main thread, else "thread N").
void set_thread_name(std::string_view name);
// Layer index set by the innermost open NEXUS_PROFILE_LAYER scope of this thread, -1 if none.
int current_layer();

// RAII span. Records nothing unless profiling is on when it is constructed. `name` must outlive
// the profile (use a string literal or another static string). Use through the macros below.
class Scope {
 public:
  Scope(const char* name, Category cat) noexcept {
    if (enabled()) [[unlikely]]
      begin(name, cat);
  }
  ~Scope() {
    if (start_ns_ >= 0) [[unlikely]]
      end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // True when this span is being recorded (profiling was on at construction and it is not closed).
  bool active() const { return start_ns_ >= 0; }
  // Attaches op details: the layer (-1 = none), the bytes moved and flops done by the call (0 =
  // unknown) and a shapes string (copied). Only call when active().
  void set_args(int layer, int64_t bytes, int64_t flops, std::string_view shapes) noexcept;
  // Makes `layer` the thread's current_layer() until this span ends. Only call when active().
  void set_layer(int layer) noexcept;
  // Ends the span now; the destructor then does nothing.
  void close() noexcept {
    if (start_ns_ >= 0) end();
  }

 private:
  void begin(const char* name, Category cat) noexcept;
  void end() noexcept;

  const char* name_ = nullptr;
  const char* shapes_ = nullptr;
  int64_t start_ns_ = -1;
  int64_t bytes_ = 0;
  int64_t flops_ = 0;
  uint64_t epoch_ = 0;
  int32_t layer_ = -1;
  int32_t prev_layer_ = -1;
  Category cat_ = Category::kOp;
  bool sets_layer_ = false;
};

// A short string formatted on the stack (no allocation), for the shapes argument of an op span:
// NEXUS_PROFILE_OP("matmul", l, bytes, flops, profile::text("x[%lldx%lld]", n, k)). Truncated to
// kCapacity - 1 characters.
struct Text {
  static constexpr int kCapacity = 120;
  char data[kCapacity];
  int size = 0;
  operator std::string_view() const { return {data, static_cast<size_t>(size)}; }  // NOLINT
};
Text text(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Aggregate of all spans of one name and category.
struct SpanStats {
  std::string name;
  Category cat = Category::kOp;
  int64_t calls = 0;
  int64_t total_ns = 0;  // sum of durations
  int64_t self_ns = 0;   // total minus the time of spans nested directly inside, same thread
  int64_t max_ns = 0;
  int64_t bytes = 0;  // summed over the calls that gave a byte count
  int64_t flops = 0;  // likewise
};

// Everything recorded since the last reset(), aggregated.
struct Stats {
  int64_t wall_ns = 0;  // time profiling was on (sum of start..stop intervals, up to now)
  int64_t n_spans = 0;
  int64_t n_counters = 0;
  int n_threads = 0;             // threads that recorded something
  uint64_t dropped = 0;          // events dropped because a thread's buffer was full
  std::vector<SpanStats> spans;  // by total_ns, largest first
};
Stats stats();

// Human-readable report: phases and ops by total time (calls, total ms, self ms, mean us, share of
// the profiled wall time, GB/s and GFLOP/s where given), then memory by category (current and
// peak), the largest tracked live buffers and the peak RSS.
std::string summary_table();

// The recorded events as a Chrome trace JSON document (see docs/PROFILING.md).
std::string chrome_trace_json();
// Writes chrome_trace_json() to `path` atomically (temporary file, then rename).
Status write_chrome_trace(const std::string& path);

struct SessionOptions {
  std::string trace_path;      // write a Chrome trace here when the session ends ("" = no trace)
  bool print_summary = false;  // print summary_table() to stderr when the session ends
};

// Profiling for the lifetime of a CLI command: when a trace path or the summary is asked for, the
// constructor resets and starts the profiler and finish() (or the destructor) stops it, writes the
// trace and prints the summary. Does nothing when neither is asked for.
class Session {
 public:
  explicit Session(SessionOptions opts);
  ~Session();
  Session(Session const&) = delete;
  Session& operator=(Session const&) = delete;

  // Stops, writes and prints; returns the error of writing the trace. Later calls return ok.
  Status finish();
  bool active() const { return active_; }

 private:
  SessionOptions opts_;
  bool active_ = false;
};

}  // namespace nexus::profile

#define NEXUS_PROFILE_CONCAT_INNER_(a, b) a##b
#define NEXUS_PROFILE_CONCAT_(a, b) NEXUS_PROFILE_CONCAT_INNER_(a, b)

// A phase span named `name` until the end of the enclosing block.
#define NEXUS_PROFILE_SCOPE(name)                                             \
  ::nexus::profile::Scope NEXUS_PROFILE_CONCAT_(nexus_profile_, __COUNTER__)( \
      (name), ::nexus::profile::Category::kPhase)

// A phase span held in variable `var`, so that `var.close()` can end it before the block does.
#define NEXUS_PROFILE_NAMED_SCOPE(var, name) \
  ::nexus::profile::Scope var((name), ::nexus::profile::Category::kPhase)

// An op span until the end of the enclosing block. The arguments after `name` are evaluated only
// while profiling is on: layer (-1 = none), bytes moved, flops (0 = unknown), shapes string.
#define NEXUS_PROFILE_OP(name, layer, bytes, flops, shapes)                                      \
  NEXUS_PROFILE_OP_IMPL_(NEXUS_PROFILE_CONCAT_(nexus_profile_, __COUNTER__), name, layer, bytes, \
                         flops, shapes)
#define NEXUS_PROFILE_OP_IMPL_(var, name, layer, bytes, flops, shapes)  \
  ::nexus::profile::Scope var((name), ::nexus::profile::Category::kOp); \
  if (var.active()) var.set_args((layer), (bytes), (flops), (shapes))

// A "layer" phase span that also makes `layer` the current_layer() of this thread.
#define NEXUS_PROFILE_LAYER(layer) \
  NEXUS_PROFILE_LAYER_IMPL_(NEXUS_PROFILE_CONCAT_(nexus_profile_, __COUNTER__), layer)
#define NEXUS_PROFILE_LAYER_IMPL_(var, layer)                               \
  ::nexus::profile::Scope var("layer", ::nexus::profile::Category::kPhase); \
  if (var.active()) var.set_layer(static_cast<int>(layer))

// Records a counter; `value` is evaluated only while profiling is on.
#define NEXUS_PROFILE_COUNTER(name, value)                                                      \
  do {                                                                                          \
    if (::nexus::profile::enabled()) ::nexus::profile::detail::record_counter((name), (value)); \
  } while (0)
