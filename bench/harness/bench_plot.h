// Bar charts of benchmark results for `nexus bench --plot`: tokens/s per test (one bar per model)
// and baseline vs current for `--compare`; rendered by plot/svg_chart.
#pragma once

#include <vector>

#include "plot/svg_chart.h"
#include "harness/bench.h"
#include "harness/bench_compare.h"

namespace nexus {

// One group per test and thread count ("tg128 t=4"), one series per model type; bars are avg_ts
// with stddev_ts error bars.
BarChart bench_chart(const std::vector<BenchResult>& results);

// One group per compared test, two series (baseline, current); bars are the medians, error bars
// the sample standard deviations of the runs (stddev_ts when a file has no samples).
BarChart compare_chart(const CompareReport& report);

}  // namespace nexus
