// nexus_train_step: one training step (forward + backward) of a randomly initialised model in
// plain f32 and in a second mode (per-block gradient checkpointing, bf16 or fp16 mixed precision,
// or both), run alternately in one process; prints the activation arena by purpose (as counted
// under MemCategory::kActivations), the rounded weight copies, and the step times.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nexus/core/allocator.h"
#include "nexus/train/train_model.h"

namespace {

using nexus::MemCategory;
using nexus::train::TrainModel;

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training step time and memory: plain f32 against checkpointing or mixed precision"};
  std::string arch = "llama", shape = "288,6,6,768,32000", vs = "checkpoint";
  int64_t batch = 8, seq = 256;
  int steps = 8, threads = 2;
  app.add_option("--arch", arch, "llama or gpt2")->check(CLI::IsMember({"llama", "gpt2"}));
  app.add_option("--shape", shape, "dim,layers,heads,ffn,vocab (default: llama2.c's 15M)");
  app.add_option("--batch", batch, "sequences per step");
  app.add_option("--seq", seq, "tokens per sequence");
  app.add_option("--steps", steps, "timed steps per mode");
  app.add_option("-t,--threads", threads, "threads of the model's pool (GEMMs and the other ops)");
  app.add_option("--vs", vs, "the second mode: checkpoint, bf16, f16, bf16+checkpoint")
      ->check(CLI::IsMember({"checkpoint", "bf16", "f16", "bf16+checkpoint", "f16+checkpoint"}));
  CLI11_PARSE(app, argc, argv);
  nexus::train::TrainOptions second;
  second.recompute_blocks = vs.find("checkpoint") != std::string::npos;
  if (vs.rfind("bf16", 0) == 0) second.precision = nexus::train::Precision::kBF16;
  if (vs.rfind("f16", 0) == 0) second.precision = nexus::train::Precision::kF16;

  std::vector<int64_t> v;
  std::stringstream ss(shape);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stoll(item));
  if (v.size() != 5) {
    std::fprintf(stderr, "--shape wants dim,layers,heads,ffn,vocab\n");
    return 2;
  }
  nexus::ModelConfig c;
  c.arch = arch == "gpt2" ? nexus::Arch::kGpt2 : nexus::Arch::kLlama;
  c.arch_name = arch;
  c.dim = v[0];
  c.n_layers = v[1];
  c.n_heads = c.n_kv_heads = v[2];
  c.ffn_dim = v[3];
  c.n_vocab = v[4];
  c.head_dim = c.rope_dim = c.dim / c.n_heads;
  c.n_ctx_train = seq;
  c.tied_output = true;
  if (c.arch == nexus::Arch::kGpt2) c.rope = nexus::RopeStyle::kNone;

  std::unique_ptr<TrainModel> models[2];
  const char* names[2] = {"plain", vs.c_str()};
  for (int k = 0; k < 2; ++k) {
    const size_t before = nexus::mem_stats().current[static_cast<int>(MemCategory::kActivations)];
    auto m = TrainModel::create(c, batch, seq, {}, k == 1 ? second : nexus::train::TrainOptions{});
    if (!m) {
      std::fprintf(stderr, "%s\n", m.status().message().c_str());
      return 1;
    }
    models[k] = std::move(m).value();
    models[k]->set_threads(threads);
    const size_t counted =
        nexus::mem_stats().current[static_cast<int>(MemCategory::kActivations)] - before;
    const nexus::train::ActivationBytes& a = models[k]->activation_bytes();
    std::printf(
        "%-12s activations counted %.1f MiB: blocks %.1f, block inputs %.1f, head %.1f "
        "(a full [b*t, vocab] logits would be %.1f; none is held), scratch %.1f, 16-bit %.1f; "
        "rounded weight copies %.1f MiB\n",
        names[k], mib(counted), mib(a.blocks), mib(a.block_inputs), mib(a.head),
        mib(static_cast<size_t>(batch * seq * c.n_vocab) * 4), mib(a.scratch), mib(a.half),
        mib(models[k]->weight_copy_bytes()));
  }
  std::mt19937 rng(1);
  std::vector<int32_t> x(batch * seq), y(batch * seq);
  for (auto& t : x) t = static_cast<int32_t>(rng() % c.n_vocab);
  for (auto& t : y) t = static_cast<int32_t>(rng() % c.n_vocab);
  // Steps alternate between the two models (plain first, then the other), so drift in the
  // machine's speed hits both; the ratio is taken pair by pair.
  // CPU time of the process is also recorded: on a shared machine it tracks the work done better
  // than wall time does (waiting for a core costs wall time, not CPU time).
  std::vector<double> times[2], cpu[2], ratios, cpu_ratios;
  for (int r = 0; r < steps; ++r) {
    for (int k = 0; k < 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      models[k]->zero_grad();
      models[k]->forward(x, y, batch, seq);
      models[k]->backward();
      cpu[k].push_back(cpu_seconds() - c0);
      times[k].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    ratios.push_back(times[1].back() / times[0].back());
    cpu_ratios.push_back(cpu[1].back() / cpu[0].back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int k = 0; k < 2; ++k) {
    const auto [lo, hi] = std::minmax_element(times[k].begin(), times[k].end());
    std::printf("%-12s step median %.3f s (min %.3f, max %.3f, %zu steps), CPU %.3f s\n", names[k],
                median(times[k]), *lo, *hi, times[k].size(), median(cpu[k]));
  }
  const auto& p = models[0]->activation_bytes();
  const auto& q = models[1]->activation_bytes();
  std::printf(
      "%s / plain (medians of pairs): wall time %.3f, CPU time %.3f; block "
      "activations (blocks + inputs + 16-bit) %.3f, arena %.3f, arena + weight copies %.3f\n",
      vs.c_str(), median(ratios), median(cpu_ratios),
      static_cast<double>(q.blocks + q.block_inputs + q.half) /
          static_cast<double>(p.blocks + p.block_inputs),
      static_cast<double>(q.total()) / static_cast<double>(p.total()),
      static_cast<double>(q.total() + models[1]->weight_copy_bytes()) /
          static_cast<double>(p.total()));
  return 0;
}
