// `nexus bench`: llama-bench-compatible throughput benchmark (pp / tg / batched tg) with JSON, CSV
// and markdown output; definitions in docs/BENCHMARKS.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>
#include <thread>

#include "command.h"
#include "harness/bench.h"
#include "harness/bench_compare.h"
#include "harness/bench_plot.h"
#include "harness/ladder.h"
#include "nexus/profile.h"
#include "plot/svg_chart.h"
#include "tensor_parallel_cli.h"

#ifndef NEXUS_BUILD_COMMIT
#define NEXUS_BUILD_COMMIT "unknown"
#endif

namespace nexus::cli {
namespace {

// Parses a comma-separated list given as CLI11 pieces ("64,512" or repeated flags) of integers
// >= `min`; the error names the flag and the bad value.
Result<std::vector<int>> int_list(const std::string& flag, const std::vector<std::string>& raw,
                                  int min) {
  std::vector<int> out;
  for (const std::string& s : raw) {
    int v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size())
      return Status::error(flag + ": '" + s + "' is not an integer");
    if (v < min)
      return Status::error(flag + ": " + s + " is out of range (must be >= " + std::to_string(min) +
                           ")");
    out.push_back(v);
  }
  if (out.empty()) return Status::error(flag + ": no value given");
  return out;
}

// Writes `chart` to `path` when a path is given; the error is a CLI message.
int write_plot(const BarChart& chart, const std::string& path, int fail_code = 1) {
  if (path.empty()) return 0;
  if (Status st = write_bar_chart_svg(chart, path); !st)
    return fail("bench", st.message(), fail_code);
  return 0;
}

// `--compare BASE CUR`: exit 0 (no regression), 1 (a "worse" test), 2 (bad input).
int compare_main(const std::vector<std::string>& files, const std::string& threshold_raw,
                 const std::string& plot) {
  auto threshold = parse_threshold(threshold_raw);
  if (!threshold) return fail("bench", threshold.status().message(), 2);
  auto report = compare_bench_files(files[0], files[1], {threshold.value()});
  if (!report) return fail("bench", "--compare: " + report.status().message(), 2);
  std::fputs(compare_to_markdown(report.value()).c_str(), stdout);
  if (int rc = write_plot(compare_chart(report.value()), plot, 2); rc != 0) return rc;
  return report.value().any_worse() ? 1 : 0;
}

// `--ladder -m MODEL`: the optimization ladder as a markdown table (and plot).
int ladder_main(const std::string& path, int n_prompt, int n_gen, int n_threads, int reps,
                uint64_t seed, bool progress, const std::string& plot) {
  auto model = Model::load(path);
  if (!model) return fail("bench", model.status().message());
  LadderOptions lo;
  lo.n_prompt = n_prompt;
  lo.n_gen = n_gen;
  lo.n_threads = n_threads;
  lo.repetitions = reps;
  lo.seed = seed;
  if (progress)
    lo.progress = [](const std::string& step) {
      std::fprintf(stderr, "nexus bench: ladder: %s\n", step.c_str());
    };
  auto rows = run_ladder(*model.value(), lo);
  if (!rows) return fail("bench", path + ": ladder: " + rows.status().message());
  const std::string name = describe_model(*model.value(), path).type;
  std::fputs(ladder_to_markdown(rows.value(), lo, name).c_str(), stdout);
  return write_plot(ladder_chart(rows.value(), name), plot);
}

int bench_main(int argc, char** argv) {
  CLI::App app{"Measure prompt processing (pp) and generation (tg) throughput like llama-bench",
               "nexus bench"};
  std::vector<std::string> models, p_raw = {"512"}, n_raw = {"128"}, b_raw = {"1"}, d_raw = {"0"};
  std::vector<std::string> t_raw = {
      std::to_string(std::max(1u, std::thread::hardware_concurrency()))};
  std::string reps_raw = "5", output = "md", kv_name = "f16";
  double bandwidth = 0;
  uint64_t seed = 1234;
  bool progress = false, ladder = false;
  std::vector<std::string> compare;
  std::string threshold = "5%", plot;
  app.add_option("-m,--model", models, "GGUF model file(s), comma-separated or repeated")
      ->delimiter(',');
  app.add_option("-p,--n-prompt", p_raw, "prompt sizes for pp tests (0 = none)")->delimiter(',');
  app.add_option("-n,--n-gen", n_raw, "tokens to generate in tg tests (0 = none)")->delimiter(',');
  app.add_option("-b,--n-seq", b_raw, "sequences decoded in lock-step in tg tests")->delimiter(',');
  app.add_option("-d,--n-depth", d_raw,
                 "context tokens before each test (filled untimed, as llama-bench's -d)")
      ->delimiter(',');
  app.add_option("-t,--threads", t_raw, "thread counts")->delimiter(',');
  app.add_option("-r,--repetitions", reps_raw, "timed runs per test (after one warm-up run)");
  app.add_option("-o,--output", output, "md | json | csv");
  app.add_option("--kv-type", kv_name, "KV cache type: f32 | f16 | q8_0");
  int64_t kv_block = 0;
  app.add_option("--kv-block", kv_block, "KV cache block size in positions (0: the context)");
  app.add_option("--bandwidth", bandwidth,
                 "memory read bandwidth in GB/s (e.g. from nexus_membw): report tg's bound");
  app.add_option("--seed", seed, "seed for the random token ids");
  app.add_flag("--progress", progress, "print progress to stderr");
  app.add_option("--compare", compare, "compare two -o json runs: BASELINE.json CURRENT.json")
      ->expected(2);
  app.add_option("--threshold", threshold, "--compare: smallest change that counts (default 5%)");
  app.add_option("--plot", plot, "also draw the results as an SVG bar chart here");
  app.add_flag("--ladder", ladder,
               "optimization ladder on one model (-p default 32, -n 64, -t 2, -r 3)");
  int tp_size = 1;
  app.add_option("--tp", tp_size,
                 "tensor parallel over this many ranks (under mpirun -np N); rank 0 reports");
  profile::SessionOptions prof;
  app.add_option("--profile", prof.trace_path, "write a Chrome/Perfetto trace JSON here");
  app.add_flag("--profile-summary", prof.print_summary, "print the op time table to stderr");
  if (auto code = parse_args(app, argc, argv, "bench")) return *code;
  if (!compare.empty()) return compare_main(compare, threshold, plot);
  if (models.empty()) return fail("bench", "no model given (-m MODEL.gguf)");
  auto prompts = int_list("-p", p_raw, 0);
  if (!prompts) return fail("bench", prompts.status().message());
  auto gens = int_list("-n", n_raw, 0);
  if (!gens) return fail("bench", gens.status().message());
  auto seqs = int_list("-b", b_raw, 1);
  if (!seqs) return fail("bench", seqs.status().message());
  auto depths = int_list("-d", d_raw, 0);
  if (!depths) return fail("bench", depths.status().message());
  auto threads = int_list("-t", t_raw, 1);
  if (!threads) return fail("bench", threads.status().message());
  auto reps = int_list("-r", {reps_raw}, 1);
  if (!reps) return fail("bench", reps.status().message());
  if (output != "md" && output != "json" && output != "csv")
    return fail("bench", "-o: unknown format '" + output + "' (md, json, csv)");
  const auto kv = dtype_from_name(kv_name);
  if (!kv || (*kv != DType::kF32 && *kv != DType::kF16 && *kv != DType::kQ8_0))
    return fail("bench", "--kv-type: '" + kv_name + "' is not f32, f16 or q8_0");
  if (bandwidth < 0) return fail("bench", "--bandwidth must be positive");
  auto started = start_tensor_parallel(tp_size);
  if (!started) return fail("bench", started.status().message(), kUsageError);
  const TpRun& tp = started.value();
  if (!tp.leader()) prof = {};  // one trace and one table: rank 0's
  if (ladder && tp.size() > 1) return tp.fail("bench", "--ladder runs in one process (no --tp)");
  if (ladder) {
    if (models.size() != 1) return fail("bench", "--ladder takes exactly one model");
    const bool given_p = app.count("-p") > 0, given_n = app.count("-n") > 0;
    return ladder_main(models[0], given_p ? prompts.value()[0] : 32, given_n ? gens.value()[0] : 64,
                       app.count("-t") > 0 ? threads.value()[0] : 2,
                       app.count("-r") > 0 ? reps.value()[0] : 3, seed, progress, plot);
  }

  std::vector<BenchTest> tests;
  for (int t : threads.value()) {
    for (int d : depths.value()) {
      for (int p : prompts.value())
        if (p > 0) tests.push_back({p, 0, 1, t, d});
      for (int n : gens.value())
        if (n > 0)
          for (int b : seqs.value()) tests.push_back({0, n, b, t, d});
    }
  }
  if (tests.empty()) return fail("bench", "nothing to run: every -p and -n value is 0");

  BenchOptions opts;
  opts.repetitions = reps.value()[0];
  opts.kv_type = *kv;
  opts.kv_block = kv_block;
  opts.bandwidth_gbps = bandwidth;
  opts.seed = seed;
  const BenchEnv env{NEXUS_BUILD_COMMIT, cpu_model_name()};
  std::vector<BenchResult> results;
  profile::Session profiling(prof);
  const size_t total = tests.size() * models.size();
  size_t done = 0;
  for (const std::string& path : models) {
    auto model = tp.group ? Model::load(path, tp.group.get()) : Model::load(path);
    if (!model) return tp.fail("bench", model.status().message());
    BenchModelInfo info = describe_model(*model.value(), path);
    if (tp.size() > 1) info.type += " tp" + std::to_string(tp.size());
    for (const BenchTest& test : tests) {
      ++done;
      const std::string name = bench_test_name(test);
      const std::string label = "[" + std::to_string(done) + "/" + std::to_string(total) + "] " +
                                path + " " + name + " t=" + std::to_string(test.n_threads);
      if (progress && tp.leader())
        opts.progress = [&label](const std::string& what) {
          std::fprintf(stderr, "nexus bench: %s: %s\n", label.c_str(), what.c_str());
        };
      auto r = run_bench_test(*model.value(), info, test, opts);
      if (!r) return tp.fail("bench", path + ": " + name + ": " + r.status().message());
      results.push_back(std::move(r).value());
    }
  }
  if (!tp.leader()) return 0;  // the other ranks ran the same tests in lock step
  const std::string text = output == "json"  ? bench_to_json(results, env)
                           : output == "csv" ? bench_to_csv(results, env)
                                             : bench_to_markdown(results, env);
  std::fputs(text.c_str(), stdout);
  if (int rc = write_plot(bench_chart(results), plot); rc != 0) return rc;
  if (Status st = profiling.finish(); !st) return fail("bench", st.message());
  return 0;
}

Register reg({"bench", "llama-bench-style pp/tg throughput benchmark (md, json, csv)", bench_main});

}  // namespace
}  // namespace nexus::cli
