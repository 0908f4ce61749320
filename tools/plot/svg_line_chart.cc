// SVG line charts: both axes linear and fitted to the finite points, ticks at 1, 2 or 5 x 10^k,
// one <polyline> per series, text through xml_escape (from svg_chart.h).
#include "plot/svg_line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "nexus/io/mapped_file.h"
#include "plot/svg_chart.h"

namespace nexus {
namespace {

constexpr const char* kColours[] = {"#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"};

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Smallest 1, 2 or 5 x 10^k step that splits a span into at most 6 intervals.
double nice_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

int digits_for(double step) {
  return step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return "<text x=\"" + num(x, 1) + "\" y=\"" + num(y, 1) + "\"" + extra + ">" + xml_escape(s) +
         "</text>\n";
}

}  // namespace

std::string render_line_chart_svg(const LineChart& chart) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_lo = kInf, x_hi = -kInf, y_lo = kInf, y_hi = -kInf;
  for (const LineSeries& s : chart.series) {
    if (s.x.size() != s.y.size())
      throw Error("[svg_line_chart] series '" + s.name + "' has " + std::to_string(s.x.size()) +
                  " x values and " + std::to_string(s.y.size()) + " y values");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (x_lo > x_hi) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;  // no points: empty axes
  if (x_hi == x_lo) x_hi = x_lo + 1;
  if (y_hi == y_lo) y_hi = y_lo + 1;
  const double xs = nice_step(x_hi - x_lo), ys = nice_step(y_hi - y_lo);
  const double x0 = std::floor(x_lo / xs) * xs, x1 = std::ceil(x_hi / xs) * xs;
  const double y0 = std::floor(y_lo / ys) * ys, y1 = std::ceil(y_hi / ys) * ys;
  const double left = 70, right = 20, top = 60, bottom = 50;
  const double w = chart.width, h = chart.height, pw = w - left - right, ph = h - top - bottom;
  auto px = [&](double x) { return left + pw * (x - x0) / (x1 - x0); };
  auto py = [&](double y) { return top + ph * (1.0 - (y - y0) / (y1 - y0)); };
  auto seg = [](double a, double b, double c, double d, const char* style) {
    return "<line x1=\"" + num(a, 1) + "\" y1=\"" + num(b, 1) + "\" x2=\"" + num(c, 1) +
           "\" y2=\"" + num(d, 1) + "\" " + style + "/>\n";
  };

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(w, 0) +
       "\" height=\"" + num(h, 0) + "\" viewBox=\"0 0 " + num(w, 0) + " " + num(h, 0) +
       "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += text(w / 2, 22, chart.title, " text-anchor=\"middle\" font-size=\"15\"");
  s += "<g class=\"axis\">\n";
  for (double v = y0; v <= y1 + ys / 2; v += ys) {
    s += seg(left, py(v), left + pw, py(v), "stroke=\"#e0e0e0\"");
    s += text(left - 6, py(v) + 4, num(v, digits_for(ys)), " text-anchor=\"end\"");
  }
  for (double v = x0; v <= x1 + xs / 2; v += xs)
    s += text(px(v), top + ph + 16, num(v, digits_for(xs)), " text-anchor=\"middle\"");
  s += seg(left, top, left, top + ph, "stroke=\"#000\"");
  s += seg(left, top + ph, left + pw, top + ph, "stroke=\"#000\"");
  s += text(18, top + ph / 2, chart.y_label,
            " text-anchor=\"middle\" transform=\"rotate(-90 18 " + num(top + ph / 2, 1) + ")\"");
  s += text(left + pw / 2, h - 10, chart.x_label, " text-anchor=\"middle\"");
  s += "</g>\n<g class=\"series\">\n";
  double legend_x = left;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const LineSeries& ser = chart.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    std::string points, dots;
    for (size_t k = 0; k < ser.x.size(); ++k) {
      if (!std::isfinite(ser.x[k]) || !std::isfinite(ser.y[k])) continue;
      const std::string p = num(px(ser.x[k]), 1) + "," + num(py(ser.y[k]), 1);
      points += (points.empty() ? "" : " ") + p;
      if (ser.markers)
        dots += "<circle cx=\"" + num(px(ser.x[k]), 1) + "\" cy=\"" + num(py(ser.y[k]), 1) +
                "\" r=\"3\" fill=\"" + colour + "\"/>\n";
    }
    if (points.empty()) continue;
    s += "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
         "\" stroke-width=\"1.5\" points=\"" + points + "\"><title>" + xml_escape(ser.name) +
         "</title></polyline>\n" + dots;
    s +=
        "<circle cx=\"" + num(legend_x + 5, 1) + "\" cy=\"40\" r=\"5\" fill=\"" + colour + "\"/>\n";
    s += text(legend_x + 14, 44, ser.name);
    legend_x += 24 + 7.0 * ser.name.size();
  }
  s += "</g>\n</svg>\n";
  return s;
}

Status write_line_chart_svg(const LineChart& chart, const std::string& path) {
  const std::string svg = render_line_chart_svg(chart);
  return write_file_atomic(path, svg.data(), svg.size());
}

}  // namespace nexus
