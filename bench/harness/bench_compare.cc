// Regression detection between two bench JSON runs: robust medians and spreads from the per-run
// samples, a noise band of twice the larger relative spread, and a markdown report.
#include "harness/bench_compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "nexus/io/mapped_file.h"
#include "harness/bench.h"

namespace nexus {
namespace {

using Json = nlohmann::json;

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

template <typename T>
T get_or(const Json& o, const char* key, T fallback) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return fallback;
  return it->get<T>();
}

}  // namespace

std::string_view compare_verdict_name(CompareVerdict v) {
  switch (v) {
    case CompareVerdict::kSame:
      return "same";
    case CompareVerdict::kBetter:
      return "better";
    case CompareVerdict::kWorse:
      return "worse";
    case CompareVerdict::kWithinNoise:
      return "within noise";
  }
  return "?";
}

double BenchSample::median() const { return samples_ts.empty() ? avg_ts : median_of(samples_ts); }

double BenchSample::rel_spread() const {
  const double m = median();
  if (m <= 0) return 0;
  if (samples_ts.size() >= 3) {
    std::vector<double> dev;
    for (double x : samples_ts) dev.push_back(std::fabs(x - m));
    return 1.4826 * median_of(dev) / m;
  }
  if (samples_ts.size() == 2) {
    const double mean = 0.5 * (samples_ts[0] + samples_ts[1]);
    return std::fabs(samples_ts[0] - samples_ts[1]) / std::sqrt(2.0) / mean;
  }
  return avg_ts > 0 ? stddev_ts / avg_ts : 0;
}

std::string BenchSample::key() const {
  return model + " | " + test + " | t=" + std::to_string(n_threads) + " | kv " + type_kv;
}

bool CompareReport::any_worse() const {
  return std::any_of(rows.begin(), rows.end(),
                     [](const CompareRow& r) { return r.verdict == CompareVerdict::kWorse; });
}

Result<std::vector<BenchSample>> parse_bench_json(std::string_view json, const std::string& what) {
  Json doc = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::error(what + ": not valid JSON");
  if (!doc.is_array()) return Status::error(what + ": expected a JSON array of bench results");
  std::vector<BenchSample> out;
  try {
    for (size_t i = 0; i < doc.size(); ++i) {
      const Json& o = doc[i];
      const std::string where = what + ": entry " + std::to_string(i);
      if (!o.is_object()) return Status::error(where + " is not an object");
      BenchSample s;
      s.model = get_or<std::string>(o, "model_type", "");
      if (s.model.empty()) s.model = basename_of(get_or<std::string>(o, "model_filename", ""));
      const int n_prompt = get_or<int>(o, "n_prompt", 0), n_gen = get_or<int>(o, "n_gen", 0);
      s.n_seq = get_or<int>(o, "n_seq", 1);
      s.test = get_or<std::string>(o, "test", "");
      if (s.test.empty()) {
        BenchTest t;
        t.n_prompt = n_prompt;
        t.n_gen = n_gen;
        t.n_seq = s.n_seq;
        t.n_depth = get_or<int>(o, "n_depth", 0);
        s.test = bench_test_name(t);
      }
      s.n_threads = get_or<int>(o, "n_threads", 1);
      s.type_kv = get_or<std::string>(o, "type_k", "");
      s.samples_ts = get_or<std::vector<double>>(o, "samples_ts", {});
      s.avg_ts = get_or<double>(o, "avg_ts", 0.0);
      s.stddev_ts = get_or<double>(o, "stddev_ts", 0.0);
      if (s.median() <= 0) return Status::error(where + " (" + s.test + ") has no tokens/s");
      out.push_back(std::move(s));
    }
  } catch (const Json::exception& e) {
    return Status::error(what + ": unexpected field type (" + e.what() + ")");
  }
  if (out.empty()) return Status::error(what + ": no bench results in the file");
  return out;
}

CompareVerdict compare_verdict(double change, double noise, double threshold) {
  if (change < -threshold)
    return -change > noise ? CompareVerdict::kWorse : CompareVerdict::kWithinNoise;
  if (change > threshold && change > noise) return CompareVerdict::kBetter;
  return CompareVerdict::kSame;
}

Result<CompareReport> compare_bench(const std::vector<BenchSample>& base,
                                    const std::vector<BenchSample>& cur,
                                    const CompareOptions& opts) {
  CompareReport rep;
  rep.threshold = opts.threshold;
  std::map<std::string, size_t> cur_index;  // first occurrence of each key
  for (size_t i = 0; i < cur.size(); ++i) cur_index.emplace(cur[i].key(), i);
  std::vector<bool> used(cur.size(), false);
  for (const BenchSample& b : base) {
    const auto it = cur_index.find(b.key());
    if (it == cur_index.end() || used[it->second]) {
      rep.only_in_base.push_back(b.key());
      continue;
    }
    used[it->second] = true;
    CompareRow row{b, cur[it->second]};
    row.change = row.cur.median() / row.base.median() - 1.0;
    row.noise = 2.0 * std::max(row.base.rel_spread(), row.cur.rel_spread());
    row.verdict = compare_verdict(row.change, row.noise, opts.threshold);
    rep.rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < cur.size(); ++i)
    if (!used[i]) rep.only_in_cur.push_back(cur[i].key());
  if (rep.rows.empty())
    return Status::error("no test of the baseline matches one of the current run (matched by " +
                         std::string("model, test, threads, sequences and KV type)"));
  return rep;
}

Result<CompareReport> compare_bench_files(const std::string& base_path, const std::string& cur_path,
                                          const CompareOptions& opts) {
  auto base_text = read_file(base_path);
  if (!base_text) return base_text.status();
  auto cur_text = read_file(cur_path);
  if (!cur_text) return cur_text.status();
  auto base = parse_bench_json(base_text.value(), base_path);
  if (!base) return base.status();
  auto cur = parse_bench_json(cur_text.value(), cur_path);
  if (!cur) return cur.status();
  return compare_bench(base.value(), cur.value(), opts);
}

Result<double> parse_threshold(std::string_view s) {
  std::string_view num = s;
  const bool percent = !num.empty() && num.back() == '%';
  if (percent) num.remove_suffix(1);
  double v = 0;
  const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size())
    return Status::error("--threshold: '" + std::string(s) + "' is not a number or percentage");
  if (percent || v >= 1) v /= 100.0;
  if (!(v > 0 && v < 1))
    return Status::error("--threshold: " + std::string(s) + " is out of range (0, 100%)");
  return v;
}

std::string compare_to_markdown(const CompareReport& report) {
  std::string out =
      "| model | test | threads | kv | baseline t/s | current t/s | change | noise | verdict |\n"
      "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |\n";
  int worse = 0;
  for (const CompareRow& r : report.rows) {
    worse += r.verdict == CompareVerdict::kWorse;
    out += "| " + r.base.model + " | " + r.base.test + " | " + std::to_string(r.base.n_threads) +
           " | " + r.base.type_kv + " | " + fmt("%.2f", r.base.median()) + " | " +
           fmt("%.2f", r.cur.median()) + " | " + fmt("%+.1f %%", 100.0 * r.change) + " | " +
           fmt("±%.1f %%", 100.0 * r.noise) + " | " + std::string(compare_verdict_name(r.verdict)) +
           " |\n";
  }
  for (const std::string& k : report.only_in_base) out += "\nonly in the baseline: " + k;
  for (const std::string& k : report.only_in_cur) out += "\nonly in the current run: " + k;
  if (!report.only_in_base.empty() || !report.only_in_cur.empty()) out += "\n";
  out += "\n" + std::to_string(report.rows.size()) + " tests compared (threshold " +
         fmt("%.1f %%", 100.0 * report.threshold) +
         "): " + (worse ? std::to_string(worse) + " worse" : std::string("no regression")) + "\n";
  return out;
}

}  // namespace nexus
