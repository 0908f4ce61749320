// Builds the bench and compare bar charts: groups tests by name and thread count, places each
// model (or baseline / current) in its own series and fills missing bars with NaN.
#include "harness/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace nexus {
namespace {

// Sample standard deviation of the runs, or the file's stddev_ts without samples.
double stddev_of(const BenchSample& s) {
  if (s.samples_ts.size() < 2) return s.stddev_ts;
  double mean = 0;
  for (double x : s.samples_ts) mean += x;
  mean /= s.samples_ts.size();
  double sq = 0;
  for (double x : s.samples_ts) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / (s.samples_ts.size() - 1));
}

}  // namespace

BarChart bench_chart(const std::vector<BenchResult>& results) {
  BarChart chart;
  chart.title = "nexus bench (tokens/s, error bars: stddev)";
  chart.x_label = "test";
  chart.y_label = "tokens/s";
  for (const BenchResult& r : results)
    if (std::find(chart.series.begin(), chart.series.end(), r.model.type) == chart.series.end())
      chart.series.push_back(r.model.type);
  for (const BenchResult& r : results) {
    const std::string label = r.test_name() + " t=" + std::to_string(r.test.n_threads);
    auto g = std::find_if(chart.groups.begin(), chart.groups.end(),
                          [&](const BarGroup& b) { return b.label == label; });
    if (g == chart.groups.end()) {
      chart.groups.push_back({label, std::vector<double>(chart.series.size(), NAN),
                              std::vector<double>(chart.series.size(), 0.0)});
      g = chart.groups.end() - 1;
    }
    const size_t i =
        std::find(chart.series.begin(), chart.series.end(), r.model.type) - chart.series.begin();
    g->values[i] = r.avg_ts;
    g->errors[i] = r.stddev_ts;
  }
  return chart;
}

BarChart compare_chart(const CompareReport& report) {
  BarChart chart;
  chart.title = "Baseline vs current (median tokens/s, error bars: stddev)";
  chart.x_label = "test";
  chart.y_label = "tokens/s";
  chart.series = {"baseline", "current"};
  for (const CompareRow& r : report.rows)
    chart.groups.push_back(
        {r.base.model + " " + r.base.test + " t=" + std::to_string(r.base.n_threads),
         {r.base.median(), r.cur.median()},
         {stddev_of(r.base), stddev_of(r.cur)}});
  return chart;
}

}  // namespace nexus
