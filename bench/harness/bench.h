// llama-bench-style throughput tests: pp (one prompt of N tokens in one decode call), tg (N tokens
// generated one decode call at a time) and batched tg (B sequences in lock-step), each with a
// warm-up run and repeated timed runs, plus the memory-bandwidth bound of generation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nexus/context.h"
#include "nexus/dtype.h"
#include "nexus/model.h"
#include "nexus/status.h"

namespace nexus {

// One test: a pp test when n_prompt > 0, otherwise a tg test of n_gen tokens per sequence; with
// n_depth > 0 it runs after a context of n_depth tokens (llama-bench's -d: filled before the timer
// starts, in batches of up to kBenchDepthBatch tokens, every sequence).
struct BenchTest {
  int n_prompt = 0;
  int n_gen = 0;
  int n_seq = 1;  // tg only: sequences decoded together, one token each per decode call
  int n_threads = 1;
  int n_depth = 0;
};

inline constexpr int kBenchDepthBatch = 512;

struct BenchOptions {
  int repetitions = 5;  // timed runs after the warm-up run
  DType kv_type = DType::kF16;
  int64_t kv_block = 0;       // KV cache block size in positions (0: one block per sequence)
  double bandwidth_gbps = 0;  // > 0: report tg's bandwidth bound and the fraction reached
  uint64_t seed = 1234;       // random token ids
  // Called before the warm-up and each timed run ("warm-up", "run 2/5"); may be empty.
  std::function<void(const std::string&)> progress;
};

// Facts about a model file recorded with every result.
struct BenchModelInfo {
  std::string filename;
  std::string type;   // "llama 15M F32": architecture, parameter count, llama.cpp file type
  uint64_t size = 0;  // bytes of tensor data
  int64_t n_params = 0;
};

struct BenchResult {
  BenchModelInfo model;
  BenchTest test;
  int n_batch = 0;  // most tokens per decode call (= n_ubatch: there is no micro-batching)
  std::string type_kv;
  std::string test_time;  // ISO 8601 UTC, when the test started
  std::vector<uint64_t> samples_ns;
  std::vector<double> samples_ts;
  double avg_ts = 0, stddev_ts = 0;
  uint64_t avg_ns = 0, stddev_ns = 0;
  size_t peak_rss_bytes = 0;   // process peak after the test
  size_t kv_bytes = 0;         // KV cache allocated for the test
  double bytes_per_token = 0;  // tg only: bytes read from memory per generated token
  double bandwidth_gbps = 0;   // as given in BenchOptions
  double bound_ts = 0;         // tg with bandwidth: bandwidth / bytes_per_token
  double bound_fraction = 0;   // avg_ts / bound_ts

  std::string test_name() const;
};

// "pp512", "tg128", or "tg128 x8" for 8 sequences; " @ d4096" after a context of 4096 (as
// llama-bench names it).
std::string bench_test_name(const BenchTest& test);

// Where and how the results were produced.
struct BenchEnv {
  std::string build_commit;
  std::string cpu_info;
};

// The "model name" line of /proc/cpuinfo ("unknown" when unreadable).
std::string cpu_model_name();
// Filename, "arch size ftype" description, tensor bytes and parameter count of a loaded model.
BenchModelInfo describe_model(const Model& model, const std::string& filename);
// Bytes a tg test reads per generated token: every tensor touched per decode step (all matrices,
// norms and the output head, plus one embedding row per token) divided by n_seq, plus the K and V
// rows attention reads, averaged over positions n_depth .. n_depth + n_gen - 1 (a token at position
// p reads p + 1).
double tg_bytes_per_token(const Model& model, int n_gen, int n_seq, DType kv_type, int n_depth = 0);

// Runs one test: creates a context sized for it, one warm-up run, then opts.repetitions timed
// runs, clearing the KV cache before each. Errors come from context creation or decoding.
Result<BenchResult> run_bench_test(const Model& model, const BenchModelInfo& info,
                                   const BenchTest& test, const BenchOptions& opts);

// llama-bench's output formats: a JSON array of objects (llama-bench's field names where the
// meaning is the same), CSV (one header line, no sample arrays) and a markdown table.
std::string bench_to_json(const std::vector<BenchResult>& results, const BenchEnv& env);
std::string bench_to_csv(const std::vector<BenchResult>& results, const BenchEnv& env);
std::string bench_to_markdown(const std::vector<BenchResult>& results, const BenchEnv& env);

}  // namespace nexus
