// SVG bar charts: well-formed XML (balanced tags, checked by a tiny tag parser), one <rect> per
// bar, labels present and escaped, error bars drawn, atomic writing.
#include "plot/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace nexus {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Walks the tags: every opening tag must be closed in order; attribute values and text must not
// hold a raw '<' or an '&' that does not start an entity. Returns "" or the first problem.
std::string check_xml(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = s.find("<svg");
  if (i == std::string::npos) return "no <svg>";
  while (i < s.size()) {
    const size_t lt = s.find('<', i);
    const std::string text = s.substr(i, (lt == std::string::npos ? s.size() : lt) - i);
    for (size_t a = text.find('&'); a != std::string::npos; a = text.find('&', a + 1)) {
      const size_t semi = text.find(';', a);
      const std::string ent = text.substr(a, semi == std::string::npos ? 0 : semi - a + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return "bad entity in text: " + text;
    }
    if (lt == std::string::npos) break;
    const size_t gt = s.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    const std::string tag = s.substr(lt + 1, gt - lt - 1);
    if (tag.find('<') != std::string::npos) return "raw '<' inside a tag: " + tag;
    if (count(tag, "\"") % 2 != 0) return "unbalanced quotes: " + tag;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return "mismatched </" + tag + ">";
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = gt + 1;
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

BarChart sample_chart() {
  BarChart c;
  c.title = "Tokens <per> second & \"more\"";
  c.x_label = "test";
  c.y_label = "tokens/s";
  c.series = {"nexus", "llama.cpp <peer>"};
  c.groups = {{"pp64", {120.5, 98.25}, {3.0, 2.0}},
              {"tg32 & co", {40.0, NAN}, {1.0, 0.0}},
              {"tg128", {35.0, 30.0}, {}}};
  return c;
}

TEST(SvgChart, WellFormedWithOneRectPerBar) {
  const std::string svg = render_bar_chart_svg(sample_chart());
  EXPECT_EQ(check_xml(svg), "") << svg;
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count(svg, "<rect"), 5u);  // 6 slots, one NaN left out
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "</svg>"), 1u);
}

TEST(SvgChart, LabelsPresentAndEscaped) {
  const std::string svg = render_bar_chart_svg(sample_chart());
  EXPECT_NE(svg.find("Tokens &lt;per&gt; second &amp; &quot;more&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<per>"), std::string::npos);
  EXPECT_NE(svg.find(">tokens/s<"), std::string::npos);
  EXPECT_NE(svg.find(">test<"), std::string::npos);
  EXPECT_NE(svg.find(">pp64<"), std::string::npos);
  EXPECT_NE(svg.find(">tg32 &amp; co<"), std::string::npos);
  EXPECT_NE(svg.find("llama.cpp &lt;peer&gt;"), std::string::npos);  // legend
  EXPECT_NE(svg.find(">120.5<"), std::string::npos);                 // value labels
  EXPECT_NE(svg.find(">98.2<"), std::string::npos);
}

TEST(SvgChart, ErrorBarsAndSingleSeries) {
  BarChart c;
  c.title = "one";
  c.series = {"t/s"};
  c.groups = {{"a", {10}, {2}}, {"b", {5}, {}}};
  const std::string svg = render_bar_chart_svg(c);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_EQ(count(svg, "<rect"), 2u);
  EXPECT_EQ(count(svg, "stroke=\"#222\""), 3u);       // one whisker: stem and two caps
  EXPECT_EQ(svg.find("<circle"), std::string::npos);  // no legend for one series
}

TEST(SvgChart, EmptyAndMismatched) {
  BarChart c;
  c.title = "empty";
  EXPECT_EQ(check_xml(render_bar_chart_svg(c)), "");
  c.series = {"a", "b"};
  c.groups = {{"x", {1.0}, {}}};
  EXPECT_THROW(render_bar_chart_svg(c), Error);
}

TEST(SvgChart, XmlEscape) { EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;"); }

TEST(SvgChart, WritesAtomically) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("nexus_chart_" + std::to_string(::getpid()) + ".svg");
  ASSERT_TRUE(write_bar_chart_svg(sample_chart(), path.string()).is_ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), render_bar_chart_svg(sample_chart()));
  std::filesystem::remove(path);
  EXPECT_FALSE(write_bar_chart_svg(sample_chart(), "/nonexistent/dir/x.svg").is_ok());
}

}  // namespace
}  // namespace nexus
