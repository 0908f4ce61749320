// A small SVG writer for benchmark plots: vertical grouped bar charts with a title, axis labels,
// value labels, optional error bars and a legend. No dependencies; output is plain SVG 1.1.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"

namespace nexus {

// One group of bars on the x axis (a test, a ladder step): values[i] belongs to series i; NaN
// leaves that bar out. errors (same length, or empty) are drawn as +- whiskers.
struct BarGroup {
  std::string label;
  std::vector<double> values;
  std::vector<double> errors;
};

struct BarChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> series;  // legend names, one colour each (legend drawn when > 1)
  std::vector<BarGroup> groups;
  int width = 0;  // 0 = from the number of bars
  int height = 420;
  int value_digits = 1;  // decimals of the value labels
};

// Escapes & < > " ' for XML text and attribute values.
std::string xml_escape(std::string_view s);

// The chart as an SVG document: every bar is exactly one <rect> (nothing else uses <rect>), with
// its value as a <text> above it and a <title> tooltip; throws nexus::Error when a group's value
// count differs from the number of series.
std::string render_bar_chart_svg(const BarChart& chart);

// Renders and writes atomically; the error names the path.
Status write_bar_chart_svg(const BarChart& chart, const std::string& path);

}  // namespace nexus
