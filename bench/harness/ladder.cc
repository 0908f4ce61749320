// Optimization ladder: converts the weights per step (in memory, through convert_gguf and a
// parsed GGUF image), runs prefill + greedy generation with the step's context options and
// measures generation time, KV / activation / weight bytes and the generated tokens.
#include "harness/ladder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "nexus/core/allocator.h"
#include "nexus/io/gguf.h"
#include "nexus/compress/gguf_convert.h"

namespace nexus {
namespace {

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string human_bytes(double b) {
  if (b >= 1024.0 * 1024) return fmt("%.2f MiB", b / (1024.0 * 1024));
  return fmt("%.1f KiB", b / 1024.0);
}

// Matrix types by bytes, largest first: "Q8_0 + F16".
std::string weight_types(const Model& model) {
  std::map<DType, size_t> bytes;
  for (const auto& t : model.gguf().tensors())
    if (t.shape.size() >= 2) bytes[t.dtype] += t.nbytes;
  std::vector<std::pair<size_t, DType>> order;
  for (const auto& [dt, n] : bytes) order.push_back({n, dt});
  std::sort(order.rbegin(), order.rend());
  std::string s;
  for (const auto& [n, dt] : order) s += (s.empty() ? "" : " + ") + std::string(dtype_name(dt));
  return s;
}

// `model`'s weights converted to `type`, as a model over an in-memory GGUF image.
Result<std::unique_ptr<Model>> converted(const Model& model, DType type) {
  auto writer = convert_gguf(model.gguf(), type);
  if (!writer) return writer.status();
  auto bytes = std::make_shared<std::vector<uint8_t>>(writer.value().serialize());
  auto file = GgufFile::parse(std::span<const uint8_t>(bytes->data(), bytes->size()), bytes,
                              std::string(dtype_name(type)) + " conversion");
  if (!file) return file.status();
  return Model::from_gguf(std::make_shared<const GgufFile>(std::move(file).value()));
}

}  // namespace

std::vector<LadderStep> ladder_steps(int n_threads) {
  const int t = std::max(1, n_threads);
  const auto naive = AttentionImpl::kNaive, flash = AttentionImpl::kFlash;
  return {
      {"Base", DType::kF32, false, naive, 1, DType::kF32},
      {"+KV cache", DType::kF32, true, naive, 1, DType::kF32},
      {"+flash attention", DType::kF32, true, flash, 1, DType::kF32},
      {"+threads", DType::kF32, true, flash, t, DType::kF32},
      {"+F16 weights", DType::kF16, true, flash, t, DType::kF32},
      {"+Q8_0 weights", DType::kQ8_0, true, flash, t, DType::kF32},
      {"+Q4_K weights", DType::kQ4_K, true, flash, t, DType::kF32},
      {"+Q8_0 KV cache", DType::kQ4_K, true, flash, t, DType::kQ8_0},
  };
}

Result<LadderRow> run_ladder_step(const Model& model, const LadderStep& step,
                                  const LadderOptions& opts) {
  if (opts.n_prompt < 1 || opts.n_gen < 1) return Status::error("ladder needs -p >= 1, -n >= 1");
  if (opts.repetitions < 1) return Status::error("repetitions must be >= 1");
  const int n_ctx = opts.n_prompt + opts.n_gen;
  ContextOptions co;
  co.n_ctx = n_ctx;
  co.n_threads = step.n_threads;
  co.kv_type = step.kv_type;
  co.attention = step.attention;
  // Without a cache each step re-decodes the whole sequence, so a batch holds all of it.
  co.max_batch = step.kv_cache ? opts.n_prompt : n_ctx;
  const MemStats before = mem_stats();
  auto ctx_r = Context::create(model, co);
  if (!ctx_r) return Status::error(step.name + ": " + ctx_r.status().message());
  Context& ctx = *ctx_r.value();
  const MemStats after = mem_stats();
  const int act = static_cast<int>(MemCategory::kActivations);
  const int scr = static_cast<int>(MemCategory::kScratch);

  LadderRow row;
  row.step = step;
  row.weight_types = weight_types(model);
  row.weight_bytes = model.weight_bytes();
  row.kv_bytes = ctx.kv_bytes();
  row.activation_bytes =
      (after.current[act] + after.current[scr]) -
      std::min(after.current[act] + after.current[scr], before.current[act] + before.current[scr]);
  if (step.attention == AttentionImpl::kNaive) {
    // The naive kernel's per-thread f32 copies of K and V, the score row and one row of scratch.
    const ModelConfig& c = model.config();
    row.activation_bytes += static_cast<size_t>(step.n_threads) * sizeof(float) *
                            (2 * n_ctx * c.head_dim + n_ctx + c.n_kv_heads * c.head_dim);
  }

  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.config().n_vocab - 1));
  std::vector<int32_t> prompt(opts.n_prompt);
  for (int32_t& id : prompt) id = pick(rng);

  Batch batch;
  std::vector<float> logits;
  std::vector<int32_t> seq;  // prompt + generated so far
  auto run_once = [&]() -> Result<double> {
    ctx.clear_seq(0);
    seq = prompt;
    batch.clear();
    for (int i = 0; i < opts.n_prompt; ++i) batch.add(prompt[i], i, 0, i + 1 == opts.n_prompt);
    NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
    const auto t0 = std::chrono::steady_clock::now();
    for (int g = 0; g < opts.n_gen; ++g) {
      const int32_t next = argmax(logits);
      seq.push_back(next);
      batch.clear();
      if (step.kv_cache) {
        batch.add(next, static_cast<int32_t>(seq.size()) - 1, 0, true);
      } else {
        ctx.clear_seq(0);  // recompute the whole sequence from scratch
        for (size_t i = 0; i < seq.size(); ++i)
          batch.add(seq[i], static_cast<int32_t>(i), 0, i + 1 == seq.size());
      }
      NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
    }
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count();
  };
  if (auto w = run_once(); !w) return Status::error(step.name + ": " + w.status().message());
  std::vector<double> secs;
  for (int r = 0; r < opts.repetitions; ++r) {
    auto s = run_once();
    if (!s) return Status::error(step.name + ": " + s.status().message());
    secs.push_back(s.value());
  }
  std::sort(secs.begin(), secs.end());
  const double med = secs.size() % 2 ? secs[secs.size() / 2]
                                     : 0.5 * (secs[secs.size() / 2 - 1] + secs[secs.size() / 2]);
  row.ms_per_token = 1e3 * med / opts.n_gen;
  row.tokens_per_s = med > 0 ? opts.n_gen / med : 0;
  row.tokens.assign(seq.begin() + opts.n_prompt, seq.end());
  return row;
}

Result<std::vector<LadderRow>> run_ladder(const Model& model, const LadderOptions& opts) {
  std::vector<LadderRow> rows;
  std::unique_ptr<Model> current;
  DType current_type = DType::kF32;
  const ModelConfig& c = model.config();
  for (const LadderStep& step : ladder_steps(opts.n_threads)) {
    if (opts.progress) opts.progress(step.name);
    LadderRow skip;
    skip.step = step;
    if (step.kv_type == DType::kQ8_0 && (c.n_kv_heads * c.head_dim) % 32 != 0) {
      skip.skipped =
          "KV row width " + std::to_string(c.n_kv_heads * c.head_dim) + " is not a multiple of 32";
      rows.push_back(std::move(skip));
      continue;
    }
    if (!current || current_type != step.weights) {
      current.reset();  // free the previous conversion first
      auto m = converted(model, step.weights);
      if (!m) {
        skip.skipped = "converting the weights: " + m.status().message();
        rows.push_back(std::move(skip));
        continue;
      }
      current = std::move(m).value();
      current_type = step.weights;
    }
    auto row = run_ladder_step(*current, step, opts);
    if (!row) return row.status();
    rows.push_back(std::move(row).value());
  }
  if (!rows[0].skipped.empty()) return Status::error("Base: " + rows[0].skipped);
  const LadderRow* prev = &rows[0];
  for (LadderRow& r : rows) {
    if (!r.skipped.empty()) {
      r.same_tokens_as_base = false;
      continue;
    }
    r.speedup_base = rows[0].ms_per_token / r.ms_per_token;
    r.speedup_prev = prev->ms_per_token / r.ms_per_token;
    r.same_tokens_as_base = r.tokens == rows[0].tokens;
    prev = &r;
  }
  return rows;
}

std::string ladder_to_markdown(const std::vector<LadderRow>& rows, const LadderOptions& opts,
                               const std::string& model_name) {
  std::string out =
      "| step | ms / token | tokens/s | vs previous | vs base | peak memory | weights | KV | "
      "activations | weight types | same tokens as Base |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n";
  for (const LadderRow& r : rows) {
    if (!r.skipped.empty()) {
      out += "| " + r.step.name + " | skipped: " + r.skipped + " | | | | | | | | | |\n";
      continue;
    }
    out += "| " + r.step.name + " | " + fmt("%.3f", r.ms_per_token) + " | " +
           fmt("%.1f", r.tokens_per_s) + " | " + fmt("%.2fx", r.speedup_prev) + " | " +
           fmt("%.2fx", r.speedup_base) + " | " + human_bytes(double(r.peak_bytes())) + " | " +
           human_bytes(double(r.weight_bytes)) + " | " + human_bytes(double(r.kv_bytes)) + " | " +
           human_bytes(double(r.activation_bytes)) + " | " + r.weight_types + " | " +
           (r.same_tokens_as_base ? "yes" : "no") + " |\n";
  }
  out += "\n" + model_name + ": prefill " + std::to_string(opts.n_prompt) +
         " random tokens, then " + std::to_string(opts.n_gen) + " greedy tokens (timed; " +
         (opts.repetitions == 1 ? std::string("one run")
                                : "median of " + std::to_string(opts.repetitions) + " runs") +
         "); +threads uses " + std::to_string(opts.n_threads) + " threads\n";
  return out;
}

BarChart ladder_chart(const std::vector<LadderRow>& rows, const std::string& model_name) {
  BarChart chart;
  chart.title = "Optimization ladder: " + model_name;
  chart.x_label = "step (each adds one optimization)";
  chart.y_label = "generated tokens/s";
  chart.series = {"tokens/s"};
  for (const LadderRow& r : rows)
    chart.groups.push_back({r.step.name, {r.skipped.empty() ? r.tokens_per_s : NAN}, {}});
  return chart;
}

}  // namespace nexus
