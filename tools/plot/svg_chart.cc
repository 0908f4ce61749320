// SVG bar charts: lays out groups of bars on a linear y axis starting at zero with "nice" tick
// steps (1, 2, 5 x 10^k), draws whiskers for errors and writes text through xml_escape.
#include "plot/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nexus/io/mapped_file.h"
#include "nexus/status.h"

namespace nexus {
namespace {

constexpr const char* kColours[] = {"#4C72B0", "#DD8452", "#55A868", "#C44E52",
                                    "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"};

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Smallest 1, 2 or 5 x 10^k step that splits [0, top] into at most 6 intervals.
double nice_step(double top) {
  if (top <= 0) return 1;
  const double raw = top / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string text(double x, double y, std::string_view s, const char* extra = "") {
  return "<text x=\"" + num(x, 1) + "\" y=\"" + num(y, 1) + "\"" + extra + ">" + xml_escape(s) +
         "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const char* style) {
  return "<line x1=\"" + num(x1, 1) + "\" y1=\"" + num(y1, 1) + "\" x2=\"" + num(x2, 1) +
         "\" y2=\"" + num(y2, 1) + "\" " + style + "/>\n";
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_bar_chart_svg(const BarChart& chart) {
  const size_t n_series = std::max<size_t>(1, chart.series.size());
  double top = 0;
  for (const BarGroup& g : chart.groups) {
    if (g.values.size() != n_series)
      throw Error("[svg_chart] group '" + g.label + "' has " + std::to_string(g.values.size()) +
                  " values for " + std::to_string(n_series) + " series");
    for (size_t i = 0; i < g.values.size(); ++i) {
      if (!std::isfinite(g.values[i])) continue;
      const double e = i < g.errors.size() && std::isfinite(g.errors[i]) ? g.errors[i] : 0;
      top = std::max(top, g.values[i] + std::max(0.0, e));
    }
  }
  const double step = nice_step(top);
  const double y_max = std::max(step, std::ceil(top / step) * step);
  // Layout: left margin for the y axis, bottom for rotated group labels, top for title + legend.
  // Bars are wide enough for their value labels (font-size 9: ~5.5 px a character); rotated group
  // labels (-35 degrees, ~6.5 px a character) set the bottom margin and may reach left of the axis.
  size_t value_chars = 0, label_chars = 0;
  for (const BarGroup& g : chart.groups) {
    label_chars = std::max(label_chars, g.label.size());
    for (double v : g.values)
      if (std::isfinite(v)) value_chars = std::max(value_chars, num(v, chart.value_digits).size());
  }
  const double bar_w = std::max(28.0, 5.5 * value_chars + 6), gap = 18, right = 20, top_m = 70;
  const double label_w = 6.5 * label_chars * 0.82, label_h = 6.5 * label_chars * 0.57;
  const double bottom = std::min(260.0, 50 + label_h);
  const double left = std::max(80.0, label_w - bar_w * n_series / 2 + 10);
  const double group_w = bar_w * n_series + gap;
  const double plot_w = std::max(200.0, group_w * chart.groups.size());
  const double width = chart.width > 0 ? chart.width : left + plot_w + right;
  const double height = chart.height + std::max(0.0, bottom - 110);
  const double plot_h = height - top_m - bottom;
  auto y_of = [&](double v) { return top_m + plot_h * (1.0 - v / y_max); };

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(width, 0) +
       "\" height=\"" + num(height, 0) + "\" viewBox=\"0 0 " + num(width, 0) + " " +
       num(height, 0) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += text(width / 2, 22, chart.title, " text-anchor=\"middle\" font-size=\"15\"");
  // Y axis with ticks and grid lines.
  s += "<g class=\"axis\">\n";
  for (double v = 0; v <= y_max + step / 2; v += step) {
    const double y = y_of(v);
    s += line(left, y, left + plot_w, y, "stroke=\"#e0e0e0\"");
    s += text(left - 6, y + 4, num(v, step < 1 ? 2 : 0), " text-anchor=\"end\"");
  }
  s += line(left, top_m, left, top_m + plot_h, "stroke=\"#000\"");
  s += line(left, top_m + plot_h, left + plot_w, top_m + plot_h, "stroke=\"#000\"");
  const double ylx = std::max(18.0, left - 58), yly = top_m + plot_h / 2;  // beside the ticks
  s += text(
      ylx, yly, chart.y_label,
      (" text-anchor=\"middle\" transform=\"rotate(-90 " + num(ylx, 1) + " " + num(yly, 1) + ")\"")
          .c_str());
  s += text(left + plot_w / 2, height - 8, chart.x_label, " text-anchor=\"middle\"");
  s += "</g>\n";
  // Bars, value labels, whiskers and group labels.
  s += "<g class=\"bars\">\n";
  for (size_t gi = 0; gi < chart.groups.size(); ++gi) {
    const BarGroup& g = chart.groups[gi];
    const double x0 = left + gap / 2 + gi * group_w;
    for (size_t i = 0; i < g.values.size(); ++i) {
      const double v = g.values[i];
      if (!std::isfinite(v)) continue;
      const double x = x0 + i * bar_w, y = y_of(std::max(0.0, v));
      const std::string series = i < chart.series.size() ? chart.series[i] : "";
      s += "<rect x=\"" + num(x + 2, 1) + "\" y=\"" + num(y, 1) + "\" width=\"" +
           num(bar_w - 4, 1) + "\" height=\"" + num(top_m + plot_h - y, 1) + "\" fill=\"" +
           kColours[i % std::size(kColours)] + "\"><title>" +
           xml_escape(g.label + (series.empty() ? "" : " / " + series) + ": " +
                      num(v, chart.value_digits)) +
           "</title></rect>\n";
      double label_y = y - 4;
      const double e = i < g.errors.size() && std::isfinite(g.errors[i]) ? g.errors[i] : 0;
      if (e > 0) {
        const double cx = x + bar_w / 2, y_hi = y_of(v + e), y_lo = y_of(std::max(0.0, v - e));
        s += line(cx, y_hi, cx, y_lo, "stroke=\"#222\"");
        s += line(cx - 5, y_hi, cx + 5, y_hi, "stroke=\"#222\"");
        s += line(cx - 5, y_lo, cx + 5, y_lo, "stroke=\"#222\"");
        label_y = y_hi - 4;
      }
      s += text(x + bar_w / 2, label_y, num(v, chart.value_digits),
                " text-anchor=\"middle\" font-size=\"9\"");
    }
    const double lx = x0 + (group_w - gap) / 2, ly = top_m + plot_h + 14;
    s += text(
        lx, ly, g.label,
        (" text-anchor=\"end\" transform=\"rotate(-35 " + num(lx, 1) + " " + num(ly, 1) + ")\"")
            .c_str());
  }
  s += "</g>\n";
  if (chart.series.size() > 1) {
    s += "<g class=\"legend\">\n";
    double x = left;
    for (size_t i = 0; i < chart.series.size(); ++i) {
      s += "<circle cx=\"" + num(x + 5, 1) + "\" cy=\"44\" r=\"5\" fill=\"" +
           kColours[i % std::size(kColours)] + "\"/>\n";
      s += text(x + 14, 48, chart.series[i]);
      x += 24 + 7.0 * chart.series[i].size();
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

Status write_bar_chart_svg(const BarChart& chart, const std::string& path) {
  const std::string svg = render_bar_chart_svg(chart);
  return write_file_atomic(path, svg.data(), svg.size());
}

}  // namespace nexus
