// The Grafana dashboard that ships in deploy/grafana (Grafana itself is not packaged here): its
// structure is what Grafana's JSON model needs, and every metric its queries use is one that
// /metrics exports.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "serve/metrics.h"

namespace nexus::serve {
namespace {

TEST(GrafanaDashboard, PanelsQueryMetricsTheServerExports) {
  std::ifstream in(std::string(NEXUS_SOURCE_DIR) + "/deploy/grafana/nexus-serve.json");
  ASSERT_TRUE(in) << "deploy/grafana/nexus-serve.json is missing";
  const nlohmann::json d = nlohmann::json::parse(in);
  ASSERT_TRUE(d["title"].is_string());
  ASSERT_TRUE(d["uid"].is_string());
  ASSERT_TRUE(d["schemaVersion"].is_number_integer());
  ASSERT_TRUE(d["panels"].is_array());
  ASSERT_GE(d["panels"].size(), 6u);

  // The names /metrics exports, from an engine with every figure set and a Redis-backed cache.
  EngineStats st;
  st.kv_blocks_total = 8;
  RequestCounters rc;
  rc.add("/v1/search", 200);
  CacheStats cache;
  cache.redis = true;
  const std::string text = prometheus_text(&st, rc, &cache);
  std::set<std::string> exported;
  const std::regex type_line(R"(# TYPE (nexus_[a-z_]+) ([a-z]+))");
  for (std::sregex_iterator it(text.begin(), text.end(), type_line), end; it != end; ++it) {
    exported.insert((*it)[1]);
    if ((*it)[2] == "histogram")
      for (const char* s : {"_bucket", "_sum", "_count"}) exported.insert((*it)[1].str() + s);
  }
  EXPECT_NE(text.find("route=\"/v1/search\""), std::string::npos) << text;

  std::set<int64_t> ids;
  const std::regex metric(R"(nexus_[a-z_]+)");
  for (const nlohmann::json& p : d["panels"]) {
    const std::string title = p.value("title", "");
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(p["id"].get<int64_t>()).second) << "duplicate panel id in " << title;
    for (const char* k : {"x", "y", "w", "h"}) EXPECT_TRUE(p["gridPos"][k].is_number()) << title;
    EXPECT_LE(p["gridPos"]["x"].get<int>() + p["gridPos"]["w"].get<int>(), 24) << title;
    ASSERT_TRUE(p["targets"].is_array() && !p["targets"].empty()) << title;
    for (const nlohmann::json& t : p["targets"]) {
      const std::string expr = t["expr"].get<std::string>();
      int used = 0;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it, ++used)
        EXPECT_TRUE(exported.count(it->str())) << title << ": " << it->str() << " is not exported";
      EXPECT_GT(used, 0) << title << ": " << expr;
    }
  }
}

}  // namespace
}  // namespace nexus::serve
