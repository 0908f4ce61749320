// Profiler: the Chrome trace parses back as JSON of the right shape, spans nest per thread across a
// thread pool, the summary agrees with measured wall time, and nothing is recorded while off.
#include "nexus/profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "nexus/core/thread_pool.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "profile/memory.h"
#include "test_paths.h"

namespace nexus {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::nanoseconds d) {
  const auto end = Clock::now() + d;
  while (Clock::now() < end) {
  }
}

int64_t since_ns(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

json read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());  // throws on invalid JSON (including invalid UTF-8)
}

std::string trace_path(const char* name) {
  return (std::filesystem::path(testing::TempDir()) / name).string();
}

const profile::SpanStats* find(const profile::Stats& st, const std::string& name) {
  for (const auto& s : st.spans)
    if (s.name == name) return &s;
  return nullptr;
}

// Each test starts and ends with the profiler off and empty.
class ProfileTest : public testing::Test {
 protected:
  void SetUp() override {
    profile::stop();
    profile::reset();
  }
  void TearDown() override {
    profile::stop();
    profile::reset();
  }
};

TEST_F(ProfileTest, ChromeTraceIsValidJsonOfTheRightShape) {
  const std::string odd = "phase \"q\" \\ back\nline\t\x01 ctrl \xC3\xA9 \xE6\xBC\xA2";
  profile::start();
  {
    NEXUS_PROFILE_SCOPE(odd.c_str());
    {
      NEXUS_PROFILE_OP("op", 3, 1000, 2000, profile::text("x[%d,%d]", 2, 3));
      spin_for(std::chrono::microseconds(50));
    }
    profile::counter("ctr", 42.5);
    NEXUS_PROFILE_SCOPE("bad utf8 \xFF\xFE end");
  }
  profile::sample_memory();
  profile::stop();
  const std::string path = trace_path("profile_trace_shape.json");
  ASSERT_TRUE(profile::write_chrome_trace(path));
  const json doc = read_trace(path);

  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  ASSERT_TRUE(doc.at("traceEvents").is_array());
  EXPECT_TRUE(doc.at("metadata").is_object());
  std::map<int64_t, std::string> thread_names;
  std::set<int64_t> span_tids;
  std::map<std::string, json> spans, counters;
  for (const json& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.at("ph").is_string());
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("pid").is_number_integer());
    const std::string ph = e["ph"];
    if (ph == "X") {
      ASSERT_TRUE(e.at("tid").is_number_integer());
      ASSERT_TRUE(e.at("ts").is_number());
      ASSERT_TRUE(e.at("dur").is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      const std::string cat = e.at("cat");
      EXPECT_TRUE(cat == "op" || cat == "phase") << cat;
      span_tids.insert(e["tid"].get<int64_t>());
      spans[e["name"]] = e;
    } else if (ph == "M") {
      if (e["name"] == "thread_name") thread_names[e.at("tid")] = e.at("args").at("name");
    } else if (ph == "C") {
      ASSERT_TRUE(e.at("ts").is_number());
      for (const auto& [k, v] : e.at("args").items()) EXPECT_TRUE(v.is_number()) << k;
      counters[e["name"]] = e;
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  for (int64_t tid : span_tids) EXPECT_TRUE(thread_names.count(tid)) << "tid " << tid;
  EXPECT_EQ(thread_names.begin()->second, "main");

  ASSERT_TRUE(spans.count(odd)) << "odd name did not round-trip";
  EXPECT_TRUE(spans.count("bad utf8 \xEF\xBF\xBD\xEF\xBF\xBD end"));
  ASSERT_TRUE(spans.count("op"));
  const json& args = spans["op"].at("args");
  EXPECT_EQ(args.at("layer"), 3);
  EXPECT_EQ(args.at("bytes"), 1000);
  EXPECT_EQ(args.at("flops"), 2000);
  EXPECT_EQ(args.at("shapes"), "x[2,3]");
  EXPECT_GE(spans["op"]["dur"].get<double>(), 50.0);
  // The op is inside the odd phase.
  EXPECT_GE(spans["op"]["ts"].get<double>(), spans[odd]["ts"].get<double>());
  ASSERT_TRUE(counters.count("ctr"));
  EXPECT_EQ(counters["ctr"]["args"]["value"], 42.5);
  ASSERT_TRUE(counters.count("memory"));
  EXPECT_TRUE(counters["memory"]["args"].contains("weights"));
  EXPECT_TRUE(counters["memory"]["args"].contains("total"));
}

// Complete events of one thread, as [start, end) in integer nanoseconds.
struct Interval {
  int64_t start, end;
  std::string name;
};

TEST_F(ProfileTest, SpansNestPerThreadAcrossAThreadPool) {
  ThreadPool pool(3);
  profile::start();
  pool.run([](int i, int) {
    for (int rep = 0; rep < 5; ++rep) {
      NEXUS_PROFILE_SCOPE("outer");
      spin_for(std::chrono::microseconds(20));
      {
        NEXUS_PROFILE_OP("inner", i, 0, 0, "");
        spin_for(std::chrono::microseconds(20));
        NEXUS_PROFILE_SCOPE("innermost");
        spin_for(std::chrono::microseconds(20));
      }
      NEXUS_PROFILE_OP("inner2", i, 0, 0, "");
      spin_for(std::chrono::microseconds(10));
    }
  });
  profile::stop();
  const std::string path = trace_path("profile_trace_nesting.json");
  ASSERT_TRUE(profile::write_chrome_trace(path));
  const json doc = read_trace(path);

  std::map<int64_t, std::vector<Interval>> by_tid;
  std::map<int64_t, std::string> names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000);
    const int64_t dur = std::llround(e["dur"].get<double>() * 1000);
    by_tid[e["tid"]].push_back({ts, ts + dur, e["name"]});
  }
  // The pool hands the 3 partitions to whichever threads claim them first (1 to 3 threads).
  ASSERT_GE(by_tid.size(), 1u);
  ASSERT_LE(by_tid.size(), 3u);
  std::set<std::string> distinct_names;
  size_t total_spans = 0;
  for (auto& [tid, spans] : by_tid) {
    distinct_names.insert(names[tid]);
    EXPECT_EQ(spans.size() % 20, 0u) << "tid " << tid;  // 20 spans per partition it ran
    total_spans += spans.size();
    std::sort(spans.begin(), spans.end(), [](const Interval& a, const Interval& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<Interval> stack;
    int max_depth = 0;
    for (const Interval& s : spans) {
      while (!stack.empty() && stack.back().end <= s.start) stack.pop_back();
      if (!stack.empty()) {
        EXPECT_LE(s.end, stack.back().end)
            << s.name << " overlaps " << stack.back().name << " on tid " << tid;
      }
      stack.push_back(s);
      max_depth = std::max(max_depth, static_cast<int>(stack.size()));
    }
    EXPECT_EQ(max_depth, 3);
  }
  EXPECT_EQ(total_spans, 60u);
  EXPECT_EQ(distinct_names.size(), by_tid.size());
  const profile::Stats st = profile::stats();
  EXPECT_EQ(st.n_threads, static_cast<int>(by_tid.size()));
  ASSERT_NE(find(st, "innermost"), nullptr);
  EXPECT_EQ(find(st, "innermost")->calls, 15);
}

// Readers (stats, trace) and reset() run while pool threads record; every trace stays valid JSON
// and every recorded span is complete. Run under -fsanitize=thread this also checks the hand-off.
TEST_F(ProfileTest, ConcurrentRecordingResetAndSnapshot) {
  std::atomic<bool> done{false};
  profile::start();
  std::thread reader([&] {
    for (int i = 0; !done.load(); ++i) {
      const json doc = json::parse(profile::chrome_trace_json());
      for (const json& e : doc["traceEvents"])
        if (e["ph"] == "X") {
          EXPECT_GE(e["dur"].get<double>(), 0.0);
        }
      if (i % 3 == 2) profile::reset();
      (void)profile::stats();
    }
  });
  for (int round = 0; round < 3; ++round) {
    ThreadPool pool(3);  // new threads each round: exited threads' buffers get reused
    pool.run([](int i, int) {
      const auto end = Clock::now() + std::chrono::milliseconds(20);
      while (Clock::now() < end) {
        NEXUS_PROFILE_SCOPE("outer");
        NEXUS_PROFILE_OP("inner", i, 1, 1, profile::text("t%d", i));
        profile::counter("n", i);
        spin_for(std::chrono::microseconds(2));
      }
    });
  }
  done = true;
  reader.join();
  profile::stop();
}

TEST_F(ProfileTest, SummaryAgreesWithMeasuredWallTime) {
  // Spans of tens of milliseconds, so that being preempted on a loaded machine (a few ms at
  // the region's edges) stays well inside the 10% bound.
  using std::chrono::milliseconds;
  int64_t a_measured = 0;
  profile::start();
  const auto t0 = Clock::now();
  {
    NEXUS_PROFILE_SCOPE("region");
    for (int i = 0; i < 4; ++i) {
      const auto ta = Clock::now();
      {
        NEXUS_PROFILE_OP("a", -1, 1'000'000, 2'000'000, "");
        spin_for(milliseconds(20));
      }
      a_measured += since_ns(ta);
    }
    for (int i = 0; i < 2; ++i) {
      NEXUS_PROFILE_SCOPE("b");
      spin_for(milliseconds(32));
      NEXUS_PROFILE_OP("c", -1, 0, 0, "");
      spin_for(milliseconds(8));
    }
    spin_for(milliseconds(12));
  }
  const int64_t wall = since_ns(t0);
  profile::stop();

  const profile::Stats st = profile::stats();
  const profile::SpanStats* region = find(st, "region");
  const profile::SpanStats* a = find(st, "a");
  const profile::SpanStats* b = find(st, "b");
  const profile::SpanStats* c = find(st, "c");
  ASSERT_TRUE(region && a && b && c);
  EXPECT_NEAR(region->total_ns, wall, 0.1 * wall);
  EXPECT_NEAR(st.wall_ns, wall, 0.1 * wall);
  EXPECT_NEAR(a->total_ns, a_measured, 0.1 * a_measured);
  EXPECT_GE(a->total_ns, 80'000'000);
  EXPECT_EQ(a->calls, 4);
  EXPECT_EQ(a->bytes, 4'000'000);
  EXPECT_EQ(a->flops, 8'000'000);
  EXPECT_EQ(b->calls, 2);
  EXPECT_EQ(b->self_ns, b->total_ns - c->total_ns);
  EXPECT_GE(c->total_ns, 4'000'000);
  // Self times of a nested tree add up to its root exactly.
  int64_t self_sum = 0;
  for (const auto& s : st.spans) self_sum += s.self_ns;
  EXPECT_EQ(self_sum, region->total_ns);
  EXPECT_EQ(st.spans.front().name, "region");  // sorted by total time

  const std::string table = profile::summary_table();
  EXPECT_NE(table.find("region"), std::string::npos) << table;
  EXPECT_NE(table.find("GFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("memory"), std::string::npos) << table;
}

TEST_F(ProfileTest, DisabledProfilingRecordsNothing) {
  int evaluated = 0, formatted = 0;
  ASSERT_FALSE(profile::enabled());
  for (int i = 0; i < 1000; ++i) {
    NEXUS_PROFILE_SCOPE("off");
    NEXUS_PROFILE_OP("off_op", 0, ++evaluated, 0, profile::text("%d", ++formatted));
    NEXUS_PROFILE_LAYER(3);
    EXPECT_EQ(profile::current_layer(), -1);
    profile::counter("c", 1);
    NEXUS_PROFILE_COUNTER("c2", ++evaluated);
    profile::sample_memory();
  }
  EXPECT_EQ(evaluated, 0);
  EXPECT_EQ(formatted, 0);
  const profile::Stats st = profile::stats();
  EXPECT_EQ(st.n_spans, 0);
  EXPECT_EQ(st.n_counters, 0);
  const json doc = json::parse(profile::chrome_trace_json());
  for (const json& e : doc["traceEvents"]) EXPECT_EQ(e["ph"], "M") << e.dump();

  // Only the spans that begin while on are recorded.
  profile::start();
  { NEXUS_PROFILE_SCOPE("on"); }
  profile::stop();
  { NEXUS_PROFILE_SCOPE("after"); }
  const profile::Stats st2 = profile::stats();
  ASSERT_EQ(st2.spans.size(), 1u);
  EXPECT_EQ(st2.spans[0].name, "on");
}

TEST_F(ProfileTest, ResetLayersAndSpansOpenAcrossReset) {
  profile::start();
  { NEXUS_PROFILE_SCOPE("before_reset"); }
  {
    NEXUS_PROFILE_SCOPE("across_reset");
    profile::reset();
  }
  {
    NEXUS_PROFILE_LAYER(7);
    EXPECT_EQ(profile::current_layer(), 7);
    {
      NEXUS_PROFILE_LAYER(8);
      EXPECT_EQ(profile::current_layer(), 8);
    }
    NEXUS_PROFILE_OP("in_layer", profile::current_layer(), 0, 0, "");
  }
  EXPECT_EQ(profile::current_layer(), -1);
  profile::stop();
  const profile::Stats st = profile::stats();
  EXPECT_EQ(find(st, "before_reset"), nullptr);
  EXPECT_EQ(find(st, "across_reset"), nullptr);
  ASSERT_NE(find(st, "layer"), nullptr);
  EXPECT_EQ(find(st, "layer")->calls, 2);
  const json doc = json::parse(profile::chrome_trace_json());
  bool seen = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["name"] != "in_layer") continue;
    seen = true;
    EXPECT_EQ(e["args"]["layer"], 7);
  }
  EXPECT_TRUE(seen);
}

TEST_F(ProfileTest, SessionWritesTheTraceAndReportsErrors) {
  {
    profile::Session off({});
    EXPECT_FALSE(off.active());
    EXPECT_FALSE(profile::enabled());
  }
  const std::string path = trace_path("profile_trace_session.json");
  std::filesystem::remove(path);
  {
    profile::Session s({path, false});
    EXPECT_TRUE(s.active());
    EXPECT_TRUE(profile::enabled());
    { NEXUS_PROFILE_SCOPE("work"); }
    EXPECT_TRUE(s.finish());
    EXPECT_FALSE(profile::enabled());
  }
  const json doc = read_trace(path);
  bool seen = false;
  for (const json& e : doc["traceEvents"]) seen = seen || e["name"] == "work";
  EXPECT_TRUE(seen);

  profile::Session bad({"/nonexistent-dir/trace.json", false});
  const Status st = bad.finish();
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("/nonexistent-dir/trace.json"), std::string::npos) << st.message();
  EXPECT_TRUE(bad.finish());  // later calls are no-ops
}

TEST_F(ProfileTest, LiveBufferRegistryListsTheLargest) {
  int a, b, c;
  profile::track_buffer(&a, 100, MemCategory::kWeights, "small");
  profile::track_buffer(&b, 300, MemCategory::kKvCache, "large");
  profile::TrackedBuffer scoped(&c, 200, MemCategory::kActivations, "middle");
  const auto top = profile::largest_live_buffers(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].name, "large");
  EXPECT_EQ(top[1].name, "middle");
  EXPECT_NE(profile::memory_report(8).find("small"), std::string::npos);
  profile::untrack_buffer(&a);
  profile::untrack_buffer(&b);
  EXPECT_EQ(profile::memory_report(8).find("small"), std::string::npos);
}

// The real forward pass emits phases, per-layer spans and named op spans with costs.
TEST_F(ProfileTest, ForwardPassIsInstrumented) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto model = Model::load(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(model) << model.status().message();
  ContextOptions opts;
  opts.n_ctx = 32;
  opts.n_threads = 2;
  auto ctx = Context::create(*model.value(), opts);
  ASSERT_TRUE(ctx) << ctx.status().message();
  std::vector<float> logits;
  profile::start();
  Batch prompt;
  for (int i = 0; i < 4; ++i) prompt.add(1 + i, i, 0, i == 3);
  ASSERT_TRUE(ctx.value()->decode(prompt, &logits));
  Batch next;
  next.add(7, 4, 0, true);
  ASSERT_TRUE(ctx.value()->decode(next, &logits));
  profile::stop();

  const profile::Stats st = profile::stats();
  const int64_t n_layers = model.value()->config().n_layers;
  for (const char* name : {"prefill", "decode", "embed", "output_head", "output", "attn_qkv",
                           "attn_output", "ffn_down", "attention", "rms_norm", "rope", "store_kv"})
    EXPECT_NE(find(st, name), nullptr) << name;
  ASSERT_NE(find(st, "layer"), nullptr);
  EXPECT_EQ(find(st, "layer")->calls, 2 * n_layers);
  EXPECT_EQ(find(st, "attn_qkv")->calls, 2 * n_layers);
  EXPECT_GT(find(st, "attn_qkv")->flops, 0);
  EXPECT_GT(find(st, "attention")->bytes, 0);
  const json doc = json::parse(profile::chrome_trace_json());
  std::set<int> layers;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "ffn_down") layers.insert(e["args"]["layer"].get<int>());
  EXPECT_EQ(static_cast<int64_t>(layers.size()), n_layers);
  EXPECT_EQ(*layers.begin(), 0);
}

}  // namespace
}  // namespace nexus
