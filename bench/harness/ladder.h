// The optimization ladder (`nexus bench --ladder`): one greedy generation workload run with the
// engine's optimizations switched on one at a time (KV cache, flash attention, threads, weight
// and KV cache types), reporting latency, speed-ups and memory per step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nexus/context.h"
#include "nexus/dtype.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "plot/svg_chart.h"

namespace nexus {

// One rung: what is switched on.
struct LadderStep {
  std::string name;  // "Base", "+KV cache", ...
  DType weights = DType::kF32;
  bool kv_cache = true;  // false: every generated token re-decodes the whole sequence
  AttentionImpl attention = AttentionImpl::kFlash;
  int n_threads = 1;
  DType kv_type = DType::kF32;
};

struct LadderOptions {
  int n_prompt = 32;    // random prompt tokens, prefilled (untimed) before generation
  int n_gen = 64;       // tokens generated greedily (timed)
  int n_threads = 2;    // threads of the "+threads" step and those after it
  int repetitions = 3;  // timed runs per step (after one warm-up run); the median is reported
  uint64_t seed = 1234;
  // Called before each step with its name; may be empty.
  std::function<void(const std::string&)> progress;
};

struct LadderRow {
  LadderStep step;
  std::string weight_types;  // matrix types actually present ("Q8_0 + F16" after fallbacks)
  double ms_per_token = 0;   // median generation time / n_gen
  double tokens_per_s = 0;
  double speedup_prev = 1, speedup_base = 1;
  size_t weight_bytes = 0, kv_bytes = 0, activation_bytes = 0;
  size_t peak_bytes() const { return weight_bytes + kv_bytes + activation_bytes; }
  std::vector<int32_t> tokens;  // the greedy tokens generated
  bool same_tokens_as_base = true;
  std::string skipped;  // why the step could not run on this model (empty = it ran)
};

// The eight steps: Base (F32 weights, naive attention, 1 thread, no KV cache) -> +KV cache ->
// +flash attention -> +threads -> +F16 weights -> +Q8_0 -> +Q4_K -> +Q8_0 KV cache.
std::vector<LadderStep> ladder_steps(int n_threads);

// Runs one step on `model` (already in the step's weight type).
Result<LadderRow> run_ladder_step(const Model& model, const LadderStep& step,
                                  const LadderOptions& opts);

// Runs every step of ladder_steps(opts.n_threads), converting `model`'s weights in memory with
// convert_gguf for each weight type (types that do not fit a row fall back as in nexus convert).
// A step the model cannot take (a failed conversion, a KV width that is not a multiple of the
// Q8_0 block) becomes a row with `skipped` set; speed-ups skip over it.
Result<std::vector<LadderRow>> run_ladder(const Model& model, const LadderOptions& opts);

// step | ms/token | tokens/s | speed-up vs previous | vs base | peak memory | weights | KV |
// same tokens as Base; then a line with the workload.
std::string ladder_to_markdown(const std::vector<LadderRow>& rows, const LadderOptions& opts,
                               const std::string& model_name);
// Tokens/s per step as a bar chart.
BarChart ladder_chart(const std::vector<LadderRow>& rows, const std::string& model_name);

}  // namespace nexus
