// Benchmark runner: builds a context per test, times warm-up + repeated pp / tg runs on random
// token ids, and derives tokens/s statistics and the memory-bandwidth bound of generation.
#include "harness/bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <random>

#include "nexus/core/allocator.h"
#include "nexus/io/gguf.h"
#include "harness/random_model.h"

namespace nexus {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Mean and sample standard deviation (0 for fewer than two values).
template <typename T>
std::pair<double, double> mean_stddev(const std::vector<T>& v) {
  if (v.empty()) return {0, 0};
  double sum = 0;
  for (T x : v) sum += static_cast<double>(x);
  const double mean = sum / v.size();
  if (v.size() < 2) return {mean, 0};
  double sq = 0;
  for (T x : v) sq += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  return {mean, std::sqrt(sq / (v.size() - 1))};
}

// Bytes of `n` values of type `t` (fractional for partial blocks; only used for estimates).
double value_bytes(DType t, int64_t n) {
  const DTypeTraits& tr = traits(t);
  return static_cast<double>(n) * tr.block_bytes / tr.block_size;
}

}  // namespace

std::string bench_test_name(const BenchTest& test) {
  std::string s;
  if (test.n_prompt > 0) {
    s = "pp" + std::to_string(test.n_prompt);
  } else {
    s = "tg" + std::to_string(test.n_gen);
    if (test.n_seq > 1) s += " x" + std::to_string(test.n_seq);
  }
  if (test.n_depth > 0) s += " @ d" + std::to_string(test.n_depth);
  return s;
}

std::string BenchResult::test_name() const { return bench_test_name(test); }

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t b = line.find_first_not_of(" \t", colon + 1);
    return b == std::string::npos ? "unknown" : line.substr(b);
  }
  return "unknown";
}

BenchModelInfo describe_model(const Model& model, const std::string& filename) {
  BenchModelInfo info;
  info.filename = filename;
  info.size = model.weight_bytes();
  info.n_params = model.n_params();
  const GgufFile& g = model.gguf();
  std::string ftype;
  if (auto ft = g.get_int("general.file_type")) {
    ftype = llama_ftype_name(static_cast<uint32_t>(*ft));
  } else {
    // No file type recorded: name the type that holds most of the matrix bytes.
    std::map<DType, size_t> bytes;
    for (const auto& t : g.tensors())
      if (t.shape.size() >= 2) bytes[t.dtype] += t.nbytes;
    size_t best = 0;
    for (const auto& [dt, n] : bytes)
      if (n > best) best = n, ftype = std::string(dtype_name(dt));
  }
  char size[32];
  if (info.n_params < 1000000)
    std::snprintf(size, sizeof(size), "%.0fK", info.n_params / 1e3);
  else if (info.n_params < 1000000000)
    std::snprintf(size, sizeof(size), "%.0fM", info.n_params / 1e6);
  else
    std::snprintf(size, sizeof(size), "%.1fB", info.n_params / 1e9);
  info.type = model.config().arch_name + " " + size + (ftype.empty() ? "" : " " + ftype);
  return info;
}

double tg_bytes_per_token(const Model& model, int n_gen, int n_seq, DType kv_type, int n_depth) {
  const ModelConfig& c = model.config();
  double step = 0;  // bytes read by one decode step of n_seq tokens, KV cache aside
  for (const auto& t : model.gguf().tensors()) {
    const bool lookup =
        t.name == "position_embd.weight" || (t.name == "token_embd.weight" && !c.tied_output);
    // The bytes the loaded weight takes (a 2:4 projection's compressed size), else the file's.
    const size_t loaded = model.loaded_tensor_bytes(t.name);
    const double bytes = static_cast<double>(loaded > 0 ? loaded : t.nbytes);
    const double row = t.shape.empty() ? 0.0 : bytes / static_cast<double>(t.shape[0]);
    if (t.name == "token_embd.weight" || t.name == "position_embd.weight")
      step += n_seq * row;       // one embedding row per token
    if (!lookup) step += bytes;  // read in full (the tied head included)
  }
  // Attention at position p reads p + 1 K and V rows per attention layer; the mean over the
  // generated ones. State-space layers read and write their fixed state once per token.
  const double kv_row = value_bytes(kv_type, c.n_kv_heads * c.head_dim);
  const double kv =
      c.n_attention_layers() * 2.0 * kv_row * (std::max(0, n_depth) + (n_gen + 1) / 2.0);
  const double state =
      c.has_recurrent() ? 2.0 * 4.0 * c.n_recurrent_layers() *
                              (c.ssm_heads() * c.ssm_head_dim() * c.ssm_state +
                               (c.ssm_conv - 1) * c.ssm_conv_channels())
                        : 0.0;
  return step / std::max(1, n_seq) + kv + state;
}

Result<BenchResult> run_bench_test(const Model& model, const BenchModelInfo& info,
                                   const BenchTest& test, const BenchOptions& opts) {
  const bool pp = test.n_prompt > 0;
  if (!pp && test.n_gen <= 0) return Status::error("a test needs n_prompt > 0 or n_gen > 0");
  if (test.n_seq < 1) return Status::error("n_seq must be >= 1");
  if (opts.repetitions < 1) return Status::error("repetitions must be >= 1");
  if (test.n_depth < 0) return Status::error("n_depth must be >= 0");
  const int n_seq = pp ? 1 : test.n_seq;
  const int depth = test.n_depth;
  const int timed_batch = pp ? test.n_prompt : n_seq;
  const int fill_batch = std::min(depth, kBenchDepthBatch);
  ContextOptions co;
  co.n_threads = test.n_threads;
  co.kv_type = opts.kv_type;
  co.kv_block = opts.kv_block;
  co.n_seq = n_seq;
  co.n_ctx = depth + (pp ? test.n_prompt : test.n_gen);
  co.max_batch = std::max(timed_batch, fill_batch);
  auto ctx_r = Context::create(model, co);
  if (!ctx_r) return ctx_r.status();
  Context& ctx = *ctx_r.value();

  BenchResult r;
  r.model = info;
  r.test = test;
  r.test.n_seq = n_seq;
  if (pp) r.test.n_gen = 0;
  r.n_batch = timed_batch;
  r.type_kv = std::string(dtype_name(opts.kv_type));
  for (char& ch : r.type_kv) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  r.test_time = utc_now();

  // Token ids are drawn before timing; pp uses one batch, tg one batch per step.
  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.config().n_vocab - 1));
  const int64_t n_tokens = pp ? test.n_prompt : static_cast<int64_t>(test.n_gen) * n_seq;
  std::vector<int32_t> ids(n_tokens), context_ids(static_cast<size_t>(depth) * n_seq);
  for (int32_t& id : ids) id = pick(rng);
  for (int32_t& id : context_ids) id = pick(rng);
  Batch batch;
  std::vector<float> logits;
  auto run_once = [&]() -> Result<uint64_t> {
    for (int s = 0; s < n_seq; ++s) ctx.clear_seq(s);
    // The context of each sequence, untimed.
    for (int s = 0; s < n_seq; ++s)
      for (int p0 = 0; p0 < depth; p0 += fill_batch) {
        const int p1 = std::min(depth, p0 + fill_batch);
        batch.clear();
        for (int p = p0; p < p1; ++p) batch.add(context_ids[s * depth + p], p, s, p + 1 == p1);
        NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
      }
    if (pp) {
      batch.clear();
      for (int i = 0; i < test.n_prompt; ++i)
        batch.add(ids[i], depth + i, 0, i + 1 == test.n_prompt);
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (pp) {
      NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
    } else {
      for (int step = 0; step < test.n_gen; ++step) {
        batch.clear();
        for (int s = 0; s < n_seq; ++s) batch.add(ids[step * n_seq + s], depth + step, s, true);
        NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  };

  if (opts.progress) opts.progress("warm-up");
  if (auto w = run_once(); !w) return w.status();
  for (int rep = 0; rep < opts.repetitions; ++rep) {
    if (opts.progress)
      opts.progress("run " + std::to_string(rep + 1) + "/" + std::to_string(opts.repetitions));
    auto ns = run_once();
    if (!ns) return ns.status();
    const uint64_t t = std::max<uint64_t>(1, ns.value());
    r.samples_ns.push_back(t);
    r.samples_ts.push_back(1e9 * static_cast<double>(n_tokens) / static_cast<double>(t));
  }
  const auto [ns_mean, ns_sd] = mean_stddev(r.samples_ns);
  const auto [ts_mean, ts_sd] = mean_stddev(r.samples_ts);
  r.avg_ns = static_cast<uint64_t>(std::llround(ns_mean));
  r.stddev_ns = static_cast<uint64_t>(std::llround(ns_sd));
  r.avg_ts = ts_mean;
  r.stddev_ts = ts_sd;
  r.peak_rss_bytes = peak_rss_bytes();
  r.kv_bytes = ctx.kv_bytes();
  if (!pp) {
    r.bytes_per_token = tg_bytes_per_token(model, test.n_gen, n_seq, opts.kv_type, depth);
    r.bandwidth_gbps = opts.bandwidth_gbps;
    if (opts.bandwidth_gbps > 0 && r.bytes_per_token > 0) {
      r.bound_ts = opts.bandwidth_gbps * 1e9 / r.bytes_per_token;
      r.bound_fraction = r.avg_ts / r.bound_ts;
    }
  } else {
    r.bandwidth_gbps = opts.bandwidth_gbps;
  }
  return r;
}

}  // namespace nexus
