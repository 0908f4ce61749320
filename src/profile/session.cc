// profile::Session: the profiler's lifetime for one CLI command (--profile FILE,
// --profile-summary).
#include <cstdio>
#include <utility>

#include "nexus/profile.h"

namespace nexus::profile {

Session::Session(SessionOptions opts) : opts_(std::move(opts)) {
  active_ = !opts_.trace_path.empty() || opts_.print_summary;
  if (!active_) return;
  reset();
  start();
}

Session::~Session() {
  if (!active_) return;
  const Status st = finish();
  if (!st) std::fprintf(stderr, "nexus: %s\n", st.message().c_str());
}

Status Session::finish() {
  if (!active_) return Status::ok();
  active_ = false;
  stop();
  Status st = Status::ok();
  if (!opts_.trace_path.empty()) {
    st = write_chrome_trace(opts_.trace_path);
    if (st)
      std::fprintf(stderr, "profile: trace written to %s (open it in https://ui.perfetto.dev)\n",
                   opts_.trace_path.c_str());
  }
  if (opts_.print_summary) std::fputs(summary_table().c_str(), stderr);
  return st;
}

}  // namespace nexus::profile
