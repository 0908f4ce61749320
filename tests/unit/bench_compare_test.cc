// Regression detection: verdicts on hand-made bench JSON (a clear regression, a noisy small drop,
// an improvement), the noise rule, threshold parsing, matching and bad input.
#include "harness/bench_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "harness/bench_plot.h"

namespace nexus {
namespace {

// One bench JSON object with the fields compare reads.
std::string entry(const std::string& model, const std::string& test, int threads,
                  const std::vector<double>& samples) {
  std::string s = "{\"model_filename\":\"/m/" + model + ".gguf\",\"model_type\":\"" + model +
                  "\",\"n_prompt\":" + (test[0] == 'p' ? test.substr(2) : "0") +
                  ",\"n_gen\":" + (test[0] == 't' ? test.substr(2) : "0") +
                  ",\"n_threads\":" + std::to_string(threads) +
                  ",\"n_seq\":1,\"type_k\":\"f16\",\"test\":\"" + test + "\",\"samples_ts\":[";
  double sum = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    s += (i ? "," : "") + std::to_string(samples[i]);
    sum += samples[i];
  }
  return s + "],\"avg_ts\":" + std::to_string(sum / samples.size()) + ",\"stddev_ts\":1.0}";
}

CompareReport compare(const std::string& base, const std::string& cur, double threshold = 0.05) {
  auto b = parse_bench_json(base, "base.json");
  auto c = parse_bench_json(cur, "cur.json");
  EXPECT_TRUE(b.is_ok() && c.is_ok());
  auto r = compare_bench(b.value(), c.value(), {threshold});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.value();
}

TEST(BenchCompare, ClearRegressionIsWorse) {
  const auto r = compare("[" + entry("llama 15M F32", "tg128", 2, {100, 101, 99, 100, 100}) + "]",
                         "[" + entry("llama 15M F32", "tg128", 2, {80, 81, 79, 80, 80}) + "]");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_NEAR(r.rows[0].change, -0.2, 1e-9);
  EXPECT_EQ(r.rows[0].verdict, CompareVerdict::kWorse);
  EXPECT_TRUE(r.any_worse());
  const std::string md = compare_to_markdown(r);
  EXPECT_NE(md.find("worse"), std::string::npos);
  EXPECT_NE(md.find("-20.0 %"), std::string::npos);
}

TEST(BenchCompare, NoisySmallDropIsWithinNoise) {
  // Medians 100 -> 93 (-7 %), but the runs spread by +-10 %: not a regression.
  const auto r = compare("[" + entry("m", "pp64", 1, {100, 88, 112, 95, 105}) + "]",
                         "[" + entry("m", "pp64", 1, {93, 80, 104, 90, 99}) + "]");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_LT(r.rows[0].change, -0.05);
  EXPECT_GT(r.rows[0].noise, -r.rows[0].change);
  EXPECT_EQ(r.rows[0].verdict, CompareVerdict::kWithinNoise);
  EXPECT_FALSE(r.any_worse());
}

TEST(BenchCompare, ImprovementAndSame) {
  const auto r = compare("[" + entry("m", "tg64", 1, {50, 50.5, 49.5}) + "," +
                             entry("m", "pp64", 1, {200, 201, 199}) + "]",
                         "[" + entry("m", "pp64", 1, {203, 202, 204}) + "," +
                             entry("m", "tg64", 1, {70, 70.2, 69.8}) + "]");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].base.test, "tg64");  // the baseline's order, matched by key
  EXPECT_EQ(r.rows[0].verdict, CompareVerdict::kBetter);
  EXPECT_EQ(r.rows[1].verdict, CompareVerdict::kSame);
  EXPECT_FALSE(r.any_worse());
}

TEST(BenchCompare, ThresholdDecides) {
  const std::string base = "[" + entry("m", "tg64", 1, {100, 100, 100}) + "]";
  const std::string cur = "[" + entry("m", "tg64", 1, {96, 96, 96}) + "]";
  EXPECT_EQ(compare(base, cur, 0.05).rows[0].verdict, CompareVerdict::kSame);
  EXPECT_EQ(compare(base, cur, 0.02).rows[0].verdict, CompareVerdict::kWorse);
}

TEST(BenchCompare, VerdictRule) {
  EXPECT_EQ(compare_verdict(-0.10, 0.04, 0.05), CompareVerdict::kWorse);
  EXPECT_EQ(compare_verdict(-0.10, 0.12, 0.05), CompareVerdict::kWithinNoise);
  EXPECT_EQ(compare_verdict(-0.03, 0.0, 0.05), CompareVerdict::kSame);
  EXPECT_EQ(compare_verdict(0.10, 0.04, 0.05), CompareVerdict::kBetter);
  EXPECT_EQ(compare_verdict(0.10, 0.20, 0.05), CompareVerdict::kSame);
}

TEST(BenchCompare, SpreadFallsBackToStddev) {
  BenchSample s;
  s.avg_ts = 100;
  s.stddev_ts = 4;
  EXPECT_DOUBLE_EQ(s.median(), 100);
  EXPECT_DOUBLE_EQ(s.rel_spread(), 0.04);
  s.samples_ts = {90, 100, 110};
  EXPECT_NEAR(s.rel_spread(), 1.4826 * 10 / 100, 1e-12);
}

TEST(BenchCompare, UnmatchedTestsAreListed) {
  const auto r = compare(
      "[" + entry("m", "tg64", 1, {50, 50, 50}) + "," + entry("m", "tg64", 4, {90, 90, 90}) + "]",
      "[" + entry("m", "tg64", 1, {50, 50, 50}) + "," + entry("other", "tg64", 1, {50, 50, 50}) +
          "]");
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_EQ(r.only_in_base.size(), 1u);
  EXPECT_NE(r.only_in_base[0].find("t=4"), std::string::npos);
  ASSERT_EQ(r.only_in_cur.size(), 1u);
  EXPECT_NE(compare_to_markdown(r).find("only in the current run: other"), std::string::npos);
}

// llama-bench's JSON has no "test" field: the name comes from n_prompt, n_gen and n_depth, so
// depths stay apart.
TEST(BenchCompare, NamesLlamaBenchEntriesWithTheirDepth) {
  const std::string peer =
      R"([{"model_type":"m","n_prompt":0,"n_gen":32,"n_depth":0,"n_threads":2,"samples_ts":[50]},)"
      R"({"model_type":"m","n_prompt":0,"n_gen":32,"n_depth":4096,"n_threads":2,"samples_ts":[9]},)"
      R"({"model_type":"m","n_prompt":512,"n_gen":0,"n_depth":1024,"n_threads":2,"samples_ts":[99]}])";
  auto r = parse_bench_json(peer, "peer.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_EQ(r.value()[0].test, "tg32");
  EXPECT_EQ(r.value()[1].test, "tg32 @ d4096");
  EXPECT_EQ(r.value()[2].test, "pp512 @ d1024");
}

TEST(BenchCompare, BadInput) {
  EXPECT_FALSE(parse_bench_json("{not json", "x.json").is_ok());
  EXPECT_NE(parse_bench_json("{not json", "x.json").status().message().find("x.json"),
            std::string::npos);
  EXPECT_FALSE(parse_bench_json("{\"a\":1}", "x.json").is_ok());
  EXPECT_FALSE(parse_bench_json("[]", "x.json").is_ok());
  EXPECT_FALSE(parse_bench_json("[{\"test\":\"tg1\"}]", "x.json").is_ok());  // no t/s
  EXPECT_FALSE(parse_bench_json("[{\"avg_ts\":\"fast\"}]", "x.json").is_ok());
  auto b = parse_bench_json("[" + entry("a", "tg64", 1, {1, 1, 1}) + "]", "b");
  auto c = parse_bench_json("[" + entry("b", "tg64", 1, {1, 1, 1}) + "]", "c");
  EXPECT_FALSE(compare_bench(b.value(), c.value(), {}).is_ok());  // nothing matches
  EXPECT_FALSE(compare_bench_files("/nonexistent/a.json", "/nonexistent/b.json", {}).is_ok());
}

TEST(BenchCompare, Charts) {
  const auto r = compare("[" + entry("m", "tg64", 1, {10, 12, 14}) + "]",
                         "[" + entry("m", "tg64", 1, {20, 20, 20}) + "]");
  const BarChart c = compare_chart(r);
  ASSERT_EQ(c.series.size(), 2u);
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].label, "m tg64 t=1");
  EXPECT_DOUBLE_EQ(c.groups[0].values[0], 12);
  EXPECT_DOUBLE_EQ(c.groups[0].errors[0], 2);  // sample stddev of 10, 12, 14
  EXPECT_DOUBLE_EQ(c.groups[0].errors[1], 0);

  std::vector<BenchResult> results(3);
  results[0].model.type = "a";
  results[0].test = {0, 16, 1, 2};
  results[0].avg_ts = 5;
  results[1].model.type = "b";
  results[1].test = {0, 16, 1, 2};
  results[1].avg_ts = 6;
  results[2].model.type = "b";
  results[2].test = {32, 0, 1, 2};
  results[2].avg_ts = 7;
  const BarChart b = bench_chart(results);
  ASSERT_EQ(b.series, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(b.groups.size(), 2u);
  EXPECT_EQ(b.groups[0].label, "tg16 t=2");
  EXPECT_DOUBLE_EQ(b.groups[0].values[1], 6);
  EXPECT_TRUE(std::isnan(b.groups[1].values[0]));  // model a has no pp32 result
}

TEST(BenchCompare, ParseThreshold) {
  EXPECT_DOUBLE_EQ(parse_threshold("5%").value(), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("5").value(), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("0.1").value(), 0.1);
  EXPECT_DOUBLE_EQ(parse_threshold("12.5%").value(), 0.125);
  EXPECT_FALSE(parse_threshold("").is_ok());
  EXPECT_FALSE(parse_threshold("abc").is_ok());
  EXPECT_FALSE(parse_threshold("0").is_ok());
  EXPECT_FALSE(parse_threshold("150%").is_ok());
}

}  // namespace
}  // namespace nexus
