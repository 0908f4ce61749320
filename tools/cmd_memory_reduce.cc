// `nexus memory-reduce IN.gguf OUT.gguf`: slot reduction of a nexus-ltm model's long-term memory
// from a calibration text, without retraining (compress/memory_reduce.h); written atomically.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/compress/memory_reduce.h"
#include "nexus/io/mapped_file.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

int memory_reduce_main(int argc, char** argv) {
  CLI::App app{"Shrink a nexus-ltm model's long-term memory to fewer slots (no retraining)",
               "nexus memory-reduce"};
  app.footer(
      "Examples:\n"
      "  nexus memory-reduce ltm.gguf small.gguf -f calib.txt --memory-compression-ratio 4\n"
      "  nexus memory-reduce ltm.gguf small.gguf -f calib.txt --memory-compression-ratio 4 "
      "--adaptive\n"
      "  nexus memory-reduce ltm.gguf small.gguf -f calib.txt --memory-energy 0.99\n"
      "See the memory's use first: nexus run -m ltm.gguf -f calib.txt --memory-stats");
  std::string input, output, calib;
  bool quiet = false;
  MemoryReduceOptions o;
  o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("input", input, "nexus-ltm GGUF model")->required();
  app.add_option("output", output, "GGUF file to write")->required();
  app.add_option("-f,--file", calib, "calibration text (the kind of text the model will read)")
      ->required();
  app.add_option("--memory-compression-ratio", o.ratio,
                 "the memory shrinks by this factor: head_dim / R slots a layer (the deep "
                 "memory: hidden / R units)");
  app.add_flag("--adaptive", o.adaptive,
               "spread the ratio's slots over the layers by where the key energy is");
  app.add_option("--memory-energy", o.energy,
                 "instead of a ratio: each layer keeps the fewest slots holding this fraction "
                 "of every head's key energy (e.g. 0.99)");
  app.add_option("--segments", o.max_segments, "calibration segments at most")
      ->capture_default_str();
  app.add_option("-t,--threads", o.n_threads, "threads")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "no progress lines");
  if (auto code = parse_args(app, argc, argv, "memory-reduce")) return *code;
  if ((o.ratio > 0) == (o.energy > 0))
    return fail("memory-reduce", "give --memory-compression-ratio R or --memory-energy E",
                kUsageError);
  if (o.ratio != 0 && !(o.ratio >= 1))
    return fail("memory-reduce", "--memory-compression-ratio must be >= 1", kUsageError);
  if (o.energy != 0 && !(o.energy > 0 && o.energy <= 1))
    return fail("memory-reduce", "--memory-energy must be in (0, 1]", kUsageError);
  if (o.adaptive && o.ratio <= 0)
    return fail("memory-reduce", "--adaptive needs --memory-compression-ratio", kUsageError);
  if (o.max_segments < 1 || o.n_threads < 1)
    return fail("memory-reduce", "--segments and -t must be >= 1", kUsageError);
  if (auto m = overwrites_source(output, {input, calib}))
    return fail("memory-reduce", *m, kUsageError);

  const auto t0 = std::chrono::steady_clock::now();
  auto text = read_file(calib);
  if (!text) return fail("memory-reduce", text.status().message());
  auto model = Model::load(input);
  if (!model) return fail("memory-reduce", model.status().message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail("memory-reduce", tok.status().message());
  const std::vector<int32_t> tokens = (*tok)->encode(*text, true);
  auto plan = plan_memory_reduce(**model, tokens, o, [&](int64_t done, int64_t total) {
    if (!quiet && (done == total || done % 32 == 0))
      std::fprintf(stderr, "memory-reduce: calibration segment %lld/%lld\n",
                   static_cast<long long>(done), static_cast<long long>(total));
  });
  if (!plan) return fail("memory-reduce", plan.status().message());
  const ModelConfig& c = (*model)->config();
  int64_t full = 0, kept = 0;
  const bool deep = c.memory_hidden > 0;
  for (size_t l = 0; l < plan->slots.size(); ++l) {
    full += plan->width;
    kept += plan->slots[l];
    std::fprintf(stderr, "memory-reduce: layer %2zu: %3lld of %lld %s, %.2f%% of the %s energy\n",
                 l, static_cast<long long>(plan->slots[l]), static_cast<long long>(plan->width),
                 deep ? "hidden units" : "slots", 100.0 * plan->kept[l], deep ? "read" : "key");
  }
  auto w = memory_reduce_gguf(**model, *plan);
  if (!w) return fail("memory-reduce", w.status().message());
  if (Status s = w->write(output); !s) return fail("memory-reduce", s.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "memory-reduce: %s -> %s: %lld -> %lld slots (memory %.2fx smaller), %lld calibration "
      "segments, %.1f s\n",
      input.c_str(), output.c_str(), static_cast<long long>(full), static_cast<long long>(kept),
      static_cast<double>(full) / static_cast<double>(kept), static_cast<long long>(plan->segments),
      secs);
  return 0;
}

Register reg({"memory-reduce",
              "shrink a nexus-ltm model's long-term memory to fewer slots (calibrated)",
              memory_reduce_main});

}  // namespace
}  // namespace nexus::cli
