// Regression detection between two `nexus bench -o json` runs: tests are matched by model, test,
// threads, sequences and KV type, and each pair gets a verdict that accounts for run-to-run noise
// (the rule is in docs/BENCHMARKS.md, "Comparing runs").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"

namespace nexus {

enum class CompareVerdict { kSame, kBetter, kWorse, kWithinNoise };
std::string_view compare_verdict_name(CompareVerdict v);  // "same", "better", ...

// One test as read back from a bench JSON object.
struct BenchSample {
  std::string model;  // model_type, or the basename of model_filename when the type is empty
  std::string test;   // "pp512", "tg128", "tg128 x8"
  int n_threads = 1;
  int n_seq = 1;
  std::string type_kv;
  std::vector<double> samples_ts;  // tokens/s of each timed run (may be empty)
  double avg_ts = 0, stddev_ts = 0;

  double median() const;  // of samples_ts, else avg_ts
  // Relative run-to-run spread: 1.4826 * MAD / median with >= 3 samples (a robust sigma), else
  // the sample standard deviation (or stddev_ts) over the mean; 0 when unknown.
  double rel_spread() const;
  std::string key() const;  // "model | test | t=N | kv" (the match key)
};

struct CompareOptions {
  double threshold = 0.05;  // relative change that counts (0.05 = 5 %)
};

struct CompareRow {
  BenchSample base, cur;
  double change = 0;  // cur median / base median - 1
  double noise = 0;   // 2 x the larger relative spread of the two
  CompareVerdict verdict = CompareVerdict::kSame;
};

struct CompareReport {
  std::vector<CompareRow> rows;           // in the baseline's order
  std::vector<std::string> only_in_base;  // match keys without a partner
  std::vector<std::string> only_in_cur;
  double threshold = 0.05;

  bool any_worse() const;
};

// Parses one `nexus bench -o json` document (an array of objects); errors name `what` and the
// problem (invalid JSON, not an array, an entry without tokens/s).
Result<std::vector<BenchSample>> parse_bench_json(std::string_view json, const std::string& what);

// Verdict of one pair: "worse" when change < -threshold and |change| > noise; "within noise"
// when change < -threshold but |change| <= noise; "better" when change > threshold and > noise;
// "same" otherwise.
CompareVerdict compare_verdict(double change, double noise, double threshold);

// Matches and judges two runs; an error when no test matches.
Result<CompareReport> compare_bench(const std::vector<BenchSample>& base,
                                    const std::vector<BenchSample>& cur,
                                    const CompareOptions& opts);
// Reads both files and compares them (errors name the file).
Result<CompareReport> compare_bench_files(const std::string& base_path, const std::string& cur_path,
                                          const CompareOptions& opts);

// "5%", "5" (both percent) or "0.05" (a fraction below 1) -> 0.05; must be in (0, 100 %).
Result<double> parse_threshold(std::string_view s);

// A markdown table (model, test, threads, baseline / current median t/s, change, noise, verdict),
// then the unmatched tests and a one-line summary.
std::string compare_to_markdown(const CompareReport& report);

}  // namespace nexus
