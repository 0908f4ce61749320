// Chrome trace writer (the JSON object format that Perfetto and chrome://tracing open): complete
// events for spans, counter events, thread names. Strings are escaped and invalid UTF-8 is
// replaced, so any name gives valid JSON.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "nexus/io/mapped_file.h"
#include "profile/recorder.h"

namespace nexus::profile {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 if it is invalid.
size_t utf8_length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return len;
}

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = utf8_length(s, i);
      if (len == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void put_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Finite values as the shortest round-trip decimal; NaN and infinities as null.
void put_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Nanoseconds as microseconds with three decimals, exactly (no floating point on the way).
void put_us(std::string& out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  put_int(out, ns / 1000);
  char frac[5] = {'.', static_cast<char>('0' + ns % 1000 / 100),
                  static_cast<char>('0' + ns % 100 / 10), static_cast<char>('0' + ns % 10), 0};
  out += frac;
}

// {"name":NAME,"cat":CAT,"ph":PH,"pid":PID,"tid":TID  (the caller adds the rest and the '}').
void open_event(std::string& out, std::string_view name, std::string_view cat, char ph, int pid,
                int tid) {
  out += "{\"name\":";
  put_string(out, name);
  if (!cat.empty()) {
    out += ",\"cat\":";
    put_string(out, cat);
  }
  out += ",\"ph\":\"";
  out += ph;
  out += "\",\"pid\":";
  put_int(out, pid);
  out += ",\"tid\":";
  put_int(out, tid);
}

void put_thread_metadata(std::string& out, int pid, const ThreadEvents& t) {
  open_event(out, "thread_name", "", 'M', pid, t.tid);
  out += ",\"args\":{\"name\":";
  put_string(out, t.name);
  out += "}},\n";
  open_event(out, "thread_sort_index", "", 'M', pid, t.tid);
  out += ",\"args\":{\"sort_index\":";
  put_int(out, t.tid);
  out += "}},\n";
}

void put_event(std::string& out, int pid, int tid, int64_t origin, const Event& e) {
  open_event(out, e.name ? e.name : "", category_name(e.cat),
             e.cat == Category::kCounter ? 'C' : 'X', pid, tid);
  out += ",\"ts\":";
  put_us(out, e.start_ns - origin);
  if (e.cat == Category::kCounter) {
    out += ",\"args\":{\"value\":";
    put_double(out, e.value);
    out += "}},\n";
    return;
  }
  out += ",\"dur\":";
  put_us(out, e.end_ns - e.start_ns);
  out += ",\"args\":{";
  bool first = true;
  const auto key = [&](const char* k) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += k;
    out += "\":";
  };
  if (e.layer >= 0) {
    key("layer");
    put_int(out, e.layer);
  }
  if (e.shapes != nullptr) {
    key("shapes");
    put_string(out, e.shapes);
  }
  if (e.bytes > 0) {
    key("bytes");
    put_int(out, e.bytes);
  }
  if (e.flops > 0) {
    key("flops");
    put_int(out, e.flops);
  }
  out += "}},\n";
}

void put_memory(std::string& out, int pid, int64_t origin, const MemSample& m) {
  open_event(out, "memory", "memory", 'C', pid, 0);
  out += ",\"ts\":";
  put_us(out, m.t_ns - origin);
  out += ",\"args\":{";
  for (int c = 0; c < static_cast<int>(MemCategory::kCount); ++c) {
    put_string(out, mem_category_name(static_cast<MemCategory>(c)));
    out += ':';
    put_int(out, static_cast<int64_t>(m.current[c]));
    out += ',';
  }
  out += "\"total\":";
  put_int(out, static_cast<int64_t>(m.total));
  out += "}},\n";
}

}  // namespace

std::string chrome_trace_json() {
  const Snapshot s = snapshot();
  const int pid = static_cast<int>(::getpid());
  size_t n_events = s.memory.size();
  for (const ThreadEvents& t : s.threads) n_events += t.events.size();

  std::string out;
  out.reserve(256 + 192 * n_events);
  out += "{\"displayTimeUnit\":\"ms\",\n\"traceEvents\":[\n";
  open_event(out, "process_name", "", 'M', pid, 0);
  out += ",\"args\":{\"name\":\"nexus\"}},\n";
  for (const ThreadEvents& t : s.threads) put_thread_metadata(out, pid, t);
  for (const ThreadEvents& t : s.threads)
    for (const Event& e : t.events) put_event(out, pid, t.tid, s.origin_ns, e);
  for (const MemSample& m : s.memory) put_memory(out, pid, s.origin_ns, m);
  out.resize(out.size() - 2);  // the last ",\n"
  out += "\n],\n\"metadata\":{\"generator\":\"nexus profile\"";
#ifdef NEXUS_VERSION
  out += ",\"nexus_version\":";
  put_string(out, NEXUS_VERSION);
#endif
  out += ",\"clock\":\"steady_clock, ts and dur in microseconds from the first profile::start()\"";
  out += ",\"profiled_wall_ms\":";
  put_double(out, static_cast<double>(s.wall_ns) / 1e6);
  out += ",\"dropped_events\":";
  put_int(out, static_cast<int64_t>(s.dropped));
  out += "}}\n";
  return out;
}

Status write_chrome_trace(const std::string& path) {
  const std::string json = chrome_trace_json();
  Status st = write_file_atomic(path, json.data(), json.size());
  if (!st) return Status::error("cannot write profile trace: " + st.message());
  return st;
}

}  // namespace nexus::profile
