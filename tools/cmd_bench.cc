// `nexus bench`: llama-bench-compatible throughput benchmark (pp / tg / batched tg) with JSON, CSV
// and markdown output; definitions in docs/BENCHMARKS.md.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/profile.h"
#include "runtime/bench.h"

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

int bench_main(int argc, char** argv) {
  CLI::App app{"Measure prompt processing (pp) and generation (tg) throughput like llama-bench",
               "nexus bench"};
  std::vector<std::string> models, p_raw = {"512"}, n_raw = {"128"}, b_raw = {"1"};
  std::vector<std::string> t_raw = {
      std::to_string(std::max(1u, std::thread::hardware_concurrency()))};
  std::string reps_raw = "5", output = "md", kv_name = "f16";
  double bandwidth = 0;
  uint64_t seed = 1234;
  bool progress = false;
  app.add_option("-m,--model", models, "GGUF model file(s), comma-separated or repeated")
      ->delimiter(',');
  app.add_option("-p,--n-prompt", p_raw, "prompt sizes for pp tests (0 = none)")->delimiter(',');
  app.add_option("-n,--n-gen", n_raw, "tokens to generate in tg tests (0 = none)")->delimiter(',');
  app.add_option("-b,--n-seq", b_raw, "sequences decoded in lock-step in tg tests")->delimiter(',');
  app.add_option("-t,--threads", t_raw, "thread counts")->delimiter(',');
  app.add_option("-r,--repetitions", reps_raw, "timed runs per test (after one warm-up run)");
  app.add_option("-o,--output", output, "md | json | csv");
  app.add_option("--kv-type", kv_name, "KV cache type: f32 | f16 | q8_0");
  app.add_option("--bandwidth", bandwidth,
                 "memory read bandwidth in GB/s (e.g. from nexus_membw): report tg's bound");
  app.add_option("--seed", seed, "seed for the random token ids");
  app.add_flag("--progress", progress, "print progress to stderr");
  profile::SessionOptions prof;
  app.add_option("--profile", prof.trace_path, "write a Chrome/Perfetto trace JSON here");
  app.add_flag("--profile-summary", prof.print_summary, "print the op time table to stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail("bench", e.what());
  }
  if (models.empty()) return fail("bench", "no model given (-m MODEL.gguf)");
  auto prompts = int_list("-p", p_raw, 0);
  if (!prompts) return fail("bench", prompts.status().message());
  auto gens = int_list("-n", n_raw, 0);
  if (!gens) return fail("bench", gens.status().message());
  auto seqs = int_list("-b", b_raw, 1);
  if (!seqs) return fail("bench", seqs.status().message());
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

  std::vector<BenchTest> tests;
  for (int t : threads.value()) {
    for (int p : prompts.value())
      if (p > 0) tests.push_back({p, 0, 1, t});
    for (int n : gens.value())
      if (n > 0)
        for (int b : seqs.value()) tests.push_back({0, n, b, t});
  }
  if (tests.empty()) return fail("bench", "nothing to run: every -p and -n value is 0");

  BenchOptions opts;
  opts.repetitions = reps.value()[0];
  opts.kv_type = *kv;
  opts.bandwidth_gbps = bandwidth;
  opts.seed = seed;
  const BenchEnv env{NEXUS_BUILD_COMMIT, cpu_model_name()};
  std::vector<BenchResult> results;
  profile::Session profiling(prof);
  const size_t total = tests.size() * models.size();
  size_t done = 0;
  for (const std::string& path : models) {
    auto model = Model::load(path);
    if (!model) return fail("bench", model.status().message());
    const BenchModelInfo info = describe_model(*model.value(), path);
    for (const BenchTest& test : tests) {
      ++done;
      const std::string name = bench_test_name(test);
      const std::string label = "[" + std::to_string(done) + "/" + std::to_string(total) + "] " +
                                path + " " + name + " t=" + std::to_string(test.n_threads);
      if (progress)
        opts.progress = [&label](const std::string& what) {
          std::fprintf(stderr, "nexus bench: %s: %s\n", label.c_str(), what.c_str());
        };
      auto r = run_bench_test(*model.value(), info, test, opts);
      if (!r) return fail("bench", path + ": " + name + ": " + r.status().message());
      results.push_back(std::move(r).value());
    }
  }
  const std::string text = output == "json"  ? bench_to_json(results, env)
                           : output == "csv" ? bench_to_csv(results, env)
                                             : bench_to_markdown(results, env);
  std::fputs(text.c_str(), stdout);
  if (Status st = profiling.finish(); !st) return fail("bench", st.message());
  return 0;
}

Register reg({"bench", "llama-bench-style pp/tg throughput benchmark (md, json, csv)", bench_main});

}  // namespace
}  // namespace nexus::cli
