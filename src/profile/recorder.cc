// Recording: one event buffer per thread (registered once, appended to without a lock), the span
// and counter paths, start/stop/reset, memory samples and the snapshot that readers work from.
#include "profile/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

namespace nexus::profile {

namespace detail {
std::atomic<bool> g_enabled{false};
}  // namespace detail

namespace {

constexpr uint32_t kChunkEvents = 4096;           // 288 KiB per chunk
constexpr int64_t kMaxEventsPerThread = 1 << 22;  // about 300 MB; later events are dropped
constexpr size_t kStringBlock = 64 << 10;

std::atomic<uint64_t> g_dropped{0};  // events lost to full buffers or failed allocations

// A block of events. The owner thread writes events[count] and then publishes it by storing
// count + 1 (release); readers load count (acquire) and copy that many events.
struct Chunk {
  Event events[kChunkEvents];
  std::atomic<uint32_t> count{0};
  std::atomic<Chunk*> next{nullptr};
};

// One thread's events. Only the owner appends; rewind() and readers run under the registry lock.
// Chunks and string blocks are kept across resets and reused, never freed.
class ThreadBuffer {
 public:
  ThreadBuffer() : head_(new Chunk), tail_(head_) {}

  // Appends `e`, or counts it as dropped when the thread has recorded its maximum.
  void append(const Event& e) {
    if (n_events_ >= kMaxEventsPerThread) {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    uint32_t n = tail_->count.load(std::memory_order_relaxed);
    if (n == kChunkEvents) {
      Chunk* next = tail_->next.load(std::memory_order_relaxed);
      if (next == nullptr) {
        next = new Chunk;
        tail_->next.store(next, std::memory_order_release);
      }
      tail_ = next;
      n = 0;
    }
    tail_->events[n] = e;
    tail_->count.store(n + 1, std::memory_order_release);
    ++n_events_;
  }

  // A NUL-terminated copy of `s` that lives until the next rewind().
  const char* intern(std::string_view s) {
    const size_t need = s.size() + 1;
    while (block_ < blocks_.size() && used_ + need > sizes_[block_]) {
      ++block_;
      used_ = 0;
    }
    if (block_ == blocks_.size()) {
      const size_t size = std::max(kStringBlock, need);
      blocks_.push_back(std::make_unique<char[]>(size));
      sizes_.push_back(size);
      used_ = 0;
    }
    char* p = blocks_[block_].get() + used_;
    std::copy(s.begin(), s.end(), p);
    p[s.size()] = '\0';
    used_ += need;
    return p;
  }

  // Forgets all events (keeping the memory) and adopts `epoch`.
  void rewind(uint64_t epoch) {
    for (Chunk* c = head_; c != nullptr; c = c->next.load(std::memory_order_relaxed))
      c->count.store(0, std::memory_order_relaxed);
    tail_ = head_;
    n_events_ = 0;
    block_ = used_ = 0;
    this->epoch.store(epoch, std::memory_order_release);
  }

  void copy_events(std::vector<Event>* out) const {
    for (const Chunk* c = head_; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
      const uint32_t n = c->count.load(std::memory_order_acquire);
      out->insert(out->end(), c->events, c->events + n);
      if (n < kChunkEvents) break;
    }
  }

  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> alive{true};
  int tid = 0;       // under the registry lock
  std::string name;  // under the registry lock
  int depth = 0;     // owner only: recorded spans open on this thread

 private:
  Chunk* head_;
  Chunk* tail_;
  int64_t n_events_ = 0;
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<size_t> sizes_;
  size_t block_ = 0;
  size_t used_ = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<ThreadBuffer>> threads;
  int next_tid = 1;
  std::vector<MemSample> memory;
  int64_t origin_ns = -1;
  int64_t run_begin_ns = 0;
  int64_t accum_ns = 0;
  bool running = false;
};

// Never destroyed, so threads still recording during static destruction stay safe.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<uint64_t> g_epoch{1};
const std::thread::id g_main_thread = std::this_thread::get_id();

thread_local ThreadBuffer* tl_buf = nullptr;
thread_local int tl_layer = -1;

// Marks the thread's buffer free for reuse once its events are reset.
struct ThreadExit {
  ThreadBuffer* buf = nullptr;
  ~ThreadExit() {
    if (buf != nullptr) buf->alive.store(false, std::memory_order_release);
  }
};
thread_local ThreadExit tl_exit;

ThreadBuffer* register_thread() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const uint64_t epoch = g_epoch.load(std::memory_order_relaxed);
  ThreadBuffer* buf = nullptr;
  for (auto& t : r.threads) {
    if (!t->alive.load(std::memory_order_acquire) &&
        t->epoch.load(std::memory_order_relaxed) != epoch) {
      buf = t.get();
      break;
    }
  }
  if (buf == nullptr) buf = r.threads.emplace_back(std::make_unique<ThreadBuffer>()).get();
  buf->alive.store(true, std::memory_order_relaxed);
  buf->tid = r.next_tid++;
  buf->name =
      std::this_thread::get_id() == g_main_thread ? "main" : "thread " + std::to_string(buf->tid);
  buf->depth = 0;
  buf->rewind(epoch);
  tl_exit.buf = buf;
  return buf;
}

// The calling thread's buffer, registered on first use and emptied if a reset() happened since.
ThreadBuffer* current_buffer() {
  ThreadBuffer* b = tl_buf;
  if (b == nullptr) [[unlikely]] {
    b = tl_buf = register_thread();
  }
  const uint64_t e = g_epoch.load(std::memory_order_acquire);
  if (b->epoch.load(std::memory_order_relaxed) != e) [[unlikely]] {
    std::lock_guard<std::mutex> lock(registry().mu);
    b->rewind(g_epoch.load(std::memory_order_relaxed));
  }
  return b;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string_view category_name(Category c) {
  switch (c) {
    case Category::kOp:
      return "op";
    case Category::kPhase:
      return "phase";
    case Category::kCounter:
      return "counter";
  }
  return "?";
}

void Scope::begin(const char* name, Category cat) noexcept {
  try {
    ThreadBuffer* b = current_buffer();
    name_ = name;
    cat_ = cat;
    shapes_ = nullptr;
    bytes_ = flops_ = 0;
    layer_ = -1;
    sets_layer_ = false;
    epoch_ = b->epoch.load(std::memory_order_relaxed);
    if (cat == Category::kPhase && b->depth == 0) sample_memory();
    ++b->depth;
    start_ns_ = now_ns();  // last, so the setup above is not charged to the span
  } catch (...) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    start_ns_ = -1;
  }
}

void Scope::end() noexcept {
  const int64_t end_ns = now_ns();
  const int64_t start_ns = start_ns_;
  start_ns_ = -1;
  if (sets_layer_) tl_layer = prev_layer_;
  try {
    ThreadBuffer* b = current_buffer();
    --b->depth;
    if (b->epoch.load(std::memory_order_relaxed) != epoch_) return;  // reset() while open
    b->append(Event{name_, shapes_, start_ns, end_ns, bytes_, flops_, 0.0, layer_, cat_});
    if (cat_ == Category::kPhase && b->depth == 0) sample_memory();
  } catch (...) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void Scope::set_args(int layer, int64_t bytes, int64_t flops, std::string_view shapes) noexcept {
  layer_ = layer;
  bytes_ = bytes;
  flops_ = flops;
  try {
    shapes_ = shapes.empty() ? nullptr : tl_buf->intern(shapes);
  } catch (...) {
    shapes_ = nullptr;
  }
}

void Scope::set_layer(int layer) noexcept {
  layer_ = layer;
  prev_layer_ = tl_layer;
  tl_layer = layer;
  sets_layer_ = true;
}

int current_layer() { return tl_layer; }

void detail::record_counter(const char* name, double value) {
  try {
    ThreadBuffer* b = current_buffer();
    const int64_t t = now_ns();
    b->append(Event{name, nullptr, t, t, 0, 0, value, -1, Category::kCounter});
  } catch (...) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void sample_memory() {
  if (!enabled()) return;
  const MemStats m = mem_stats();
  MemSample s;
  s.t_ns = now_ns();
  std::copy(std::begin(m.current), std::end(m.current), std::begin(s.current));
  s.total = m.total_current;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.memory.push_back(s);
}

void set_thread_name(std::string_view name) {
  ThreadBuffer* b = current_buffer();
  std::lock_guard<std::mutex> lock(registry().mu);
  b->name = std::string(name);
}

void start() {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.running) return;
    const int64_t t = now_ns();
    if (r.origin_ns < 0) r.origin_ns = t;
    r.run_begin_ns = t;
    r.running = true;
    detail::g_enabled.store(true, std::memory_order_release);
  }
  sample_memory();
}

void stop() {
  sample_memory();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.running) return;
  r.accum_ns += now_ns() - r.run_begin_ns;
  r.running = false;
  detail::g_enabled.store(false, std::memory_order_release);
}

void reset() {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    g_epoch.fetch_add(1, std::memory_order_acq_rel);
    g_dropped.store(0, std::memory_order_relaxed);
    r.memory.clear();
    const int64_t t = now_ns();
    r.origin_ns = r.running ? t : -1;
    r.run_begin_ns = t;
    r.accum_ns = 0;
  }
  sample_memory();
}

Snapshot snapshot() {
  Snapshot s;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const int64_t t = now_ns();
    const uint64_t epoch = g_epoch.load(std::memory_order_relaxed);
    s.origin_ns = r.origin_ns < 0 ? t : r.origin_ns;
    s.wall_ns = r.accum_ns + (r.running ? t - r.run_begin_ns : 0);
    s.dropped = g_dropped.load(std::memory_order_relaxed);
    s.memory = r.memory;
    for (const auto& buf : r.threads) {
      if (buf->epoch.load(std::memory_order_acquire) != epoch) continue;
      ThreadEvents te;
      te.tid = buf->tid;
      te.name = buf->name;
      buf->copy_events(&te.events);
      if (!te.events.empty()) s.threads.push_back(std::move(te));
    }
    // Copy the shapes strings while the owners cannot rewind (they need this lock to do so).
    for (ThreadEvents& te : s.threads) {
      for (Event& e : te.events) {
        if (e.shapes == nullptr) continue;
        e.shapes = s.strings.emplace_back(e.shapes).c_str();
      }
    }
  }
  for (ThreadEvents& te : s.threads) {
    std::sort(te.events.begin(), te.events.end(), [](const Event& a, const Event& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
  }
  std::sort(s.threads.begin(), s.threads.end(),
            [](const ThreadEvents& a, const ThreadEvents& b) { return a.tid < b.tid; });
  return s;
}

Text text(const char* fmt, ...) {
  Text t;
  va_list args;
  va_start(args, fmt);
  const int n = std::vsnprintf(t.data, Text::kCapacity, fmt, args);
  va_end(args);
  t.size = n < 0 ? 0 : std::min(n, Text::kCapacity - 1);
  return t;
}

}  // namespace nexus::profile
