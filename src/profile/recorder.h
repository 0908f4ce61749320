// Internal view of the profiler's recorded data: the event record each thread appends to its own
// buffer, and a snapshot of all threads' events that the trace writer and the summary read.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "nexus/core/allocator.h"
#include "nexus/profile.h"

namespace nexus::profile {

// One completed span (start < end) or one counter sample (start == end, `value` set).
struct Event {
  const char* name;
  const char* shapes;  // nullptr or a copy in the thread's string pool
  int64_t start_ns;
  int64_t end_ns;
  int64_t bytes;
  int64_t flops;
  double value;
  int32_t layer;
  Category cat;
};

// Current bytes of every memory category at one moment.
struct MemSample {
  int64_t t_ns = 0;
  size_t current[static_cast<int>(MemCategory::kCount)] = {};
  size_t total = 0;
};

struct ThreadEvents {
  int tid = 0;
  std::string name;
  std::vector<Event> events;  // spans sorted by start, longest first on ties; counters after
};

// All events since the last reset(), copied out of the thread buffers (shapes strings included, so
// a later reset() cannot change it). Event names point at the callers' static strings.
struct Snapshot {
  int64_t origin_ns = 0;  // steady-clock time of the first start() since reset(): trace time 0
  int64_t wall_ns = 0;
  uint64_t dropped = 0;
  std::vector<ThreadEvents> threads;  // threads with at least one event
  std::vector<MemSample> memory;
  std::deque<std::string> strings;  // the shapes strings that events point to
};

Snapshot snapshot();

// Steady-clock nanoseconds.
int64_t now_ns();

}  // namespace nexus::profile
