// A small SVG writer for line charts (training curves): one polyline per series over a shared
// linear x axis, a y axis fitted to the data with "nice" ticks, axis labels and a legend.
#pragma once

#include <string>
#include <vector>

#include "nexus/status.h"

namespace nexus {

struct LineSeries {
  std::string name;
  std::vector<double> x, y;  // same length; points are drawn in the given order
  bool markers = false;      // also draw a dot at each point (for sparse series)
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<LineSeries> series;
  int width = 720;
  int height = 420;
};

// The chart as an SVG document: each series with at least one point is exactly one <polyline>
// (nothing else uses <polyline>) carrying the series name in a <title>. Non-finite points are
// skipped. Throws nexus::Error when a series' x and y differ in length.
std::string render_line_chart_svg(const LineChart& chart);

// Renders and writes atomically; the error names the path.
Status write_line_chart_svg(const LineChart& chart, const std::string& path);

}  // namespace nexus
