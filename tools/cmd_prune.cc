// `nexus prune IN.gguf OUT.gguf`: structured pruning (FFN channels, attention KV groups) to a
// smaller dense model, by importances from a calibration text or an imatrix, unstructured
// magnitude/Wanda pruning and 2:4 semi-structured pruning (compress/prune.h); written atomically.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "command.h"
#include "nexus/compress/imatrix.h"
#include "nexus/compress/prune.h"
#include "nexus/io/gguf.h"
#include "nexus/io/mapped_file.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

int prune_main(int argc, char** argv_in) {
  // CLI11 takes no ':' in an option's name: the usual spelling --2:4 is read as --2of4.
  std::vector<char*> args(argv_in, argv_in + argc);
  static char k2of4[] = "--2of4";
  for (char*& a : args)
    if (std::strcmp(a, "--2:4") == 0) a = k2of4;
  char** argv = args.data();
  CLI::App app{"Prune a GGUF model: fewer FFN channels and heads, or zeroed weights",
               "nexus prune"};
  app.footer(
      "Examples:\n"
      "  nexus prune model.gguf small.gguf --structured --ffn-keep 0.5 -f calib.txt\n"
      "  nexus prune model.gguf small.gguf --structured --heads-keep 0.75 --imatrix imatrix.gguf\n"
      "  nexus prune model.gguf sparse.gguf --unstructured 0.5\n"
      "  nexus prune model.gguf sparse.gguf --2:4 -f calib.txt\n"
      "Then fine-tune: nexus train --init small.gguf --data DATA.bin ...");
  std::string input, output, calib, imatrix_path;
  bool structured = false, quiet = false;
  PruneOptions o;
  ImatrixOptions io;
  io.n_ctx = 256;
  io.chunks = 32;
  io.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("input", input, "GGUF model to prune")->required();
  app.add_option("output", output, "GGUF file to write")->required();
  app.add_flag("--structured", structured,
               "remove FFN channels (--ffn-keep) and KV groups of heads (--heads-keep)");
  app.add_option("--ffn-keep", o.ffn_keep,
                 "fraction of FFN channels kept per layer (rounded up to a multiple of 32)")
      ->capture_default_str();
  app.add_option("--heads-keep", o.heads_keep,
                 "fraction of KV heads (with their query heads) kept per layer")
      ->capture_default_str();
  app.add_option("--unstructured", o.unstructured,
                 "fraction of each weight row zeroed by magnitude (Wanda's score with an imatrix)")
      ->capture_default_str();
  app.add_flag("--2of4", o.two_of_four,
               "2:4 sparsity (also --2:4): two of every four consecutive weights zeroed, by "
               "magnitude (Wanda's score with calibration); nexus runs such F32/F16/BF16 matrices "
               "compressed");
  app.add_option("-f,--file", calib, "calibration text for the importances");
  app.add_option("--imatrix", imatrix_path, "importances from nexus imatrix or llama-imatrix");
  app.add_option("-c,--ctx-size", io.n_ctx, "calibration tokens per chunk")->capture_default_str();
  app.add_option("--chunks", io.chunks, "calibration chunks (-1: the whole text)")
      ->capture_default_str();
  app.add_option("-t,--threads", io.n_threads, "threads")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "no line per tensor");
  if (auto code = parse_args(app, argc, argv, "prune")) return *code;
  if (!structured && (o.ffn_keep != 1.0 || o.heads_keep != 1.0))
    return fail("prune", "--ffn-keep and --heads-keep need --structured", kUsageError);
  if (structured && o.ffn_keep == 1.0 && o.heads_keep == 1.0)
    return fail("prune", "--structured needs --ffn-keep or --heads-keep below 1", kUsageError);
  if (!structured && o.unstructured == 0.0 && !o.two_of_four)
    return fail("prune", "nothing to do: give --structured, --unstructured S or --2:4",
                kUsageError);
  if (o.two_of_four && o.unstructured > 0.0)
    return fail("prune", "give --2:4 or --unstructured, not both", kUsageError);
  if (!calib.empty() && !imatrix_path.empty())
    return fail("prune", "give -f or --imatrix, not both", kUsageError);
  if (structured && calib.empty() && imatrix_path.empty())
    return fail("prune", "--structured needs importances: -f CALIB.txt or --imatrix FILE",
                kUsageError);
  if (io.n_threads < 1)
    return fail("prune", "-t must be >= 1, got " + std::to_string(io.n_threads), kUsageError);
  if (auto m = overwrites_source(output, {input, calib, imatrix_path}))
    return fail("prune", *m, kUsageError);

  const auto t0 = std::chrono::steady_clock::now();
  Imatrix imatrix;
  if (!imatrix_path.empty()) {
    auto m = read_imatrix(imatrix_path);
    if (!m) return fail("prune", m.status().message());
    imatrix = std::move(m).value();
    o.imatrix = &imatrix;
  } else if (!calib.empty()) {
    auto text = read_file(calib);
    if (!text) return fail("prune", text.status().message());
    auto model = Model::load(input);
    if (!model) return fail("prune", model.status().message());
    auto tok = Tokenizer::from_gguf((*model)->gguf());
    if (!tok) return fail("prune", tok.status().message());
    io.dataset = calib;
    auto m = collect_imatrix(**model, **tok, *text, io, [&](int64_t done, int64_t total) {
      if (!quiet)
        std::fprintf(stderr, "prune: calibration chunk %lld/%lld\n", static_cast<long long>(done),
                     static_cast<long long>(total));
    });
    if (!m) return fail("prune", m.status().message());
    imatrix = std::move(m).value();
    o.imatrix = &imatrix;
  }
  auto in = GgufFile::open(input);
  if (!in) return fail("prune", in.status().message());
  auto plan = plan_prune(*in, o);
  if (!plan) return fail("prune", plan.status().message());
  if (!plan->ffn.empty())
    std::fprintf(stderr, "prune: FFN %lld -> %lld channels per layer\n",
                 static_cast<long long>(plan->n_ff), static_cast<long long>(plan->n_ff_kept));
  if (!plan->groups.empty())
    std::fprintf(stderr, "prune: attention %lld -> %lld KV heads per layer (%lld -> %lld heads)\n",
                 static_cast<long long>(plan->n_kv), static_cast<long long>(plan->n_kv_kept),
                 static_cast<long long>(plan->n_head),
                 static_cast<long long>(plan->n_kv_kept * plan->n_head / plan->n_kv));
  auto w = prune_gguf(*in, o, [&](size_t i, size_t n, const std::string& name) {
    if (!quiet) std::fprintf(stderr, "[%4zu/%4zu] %s\n", i, n, name.c_str());
  });
  if (!w) return fail("prune", w.status().message());
  if (Status s = w->write(output); !s) return fail("prune", s.message());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto out = GgufFile::open(output);
  std::printf("prune: %s -> %s: %.2f MiB -> %.2f MiB in %.1f s\n", input.c_str(), output.c_str(),
              in->file_size() / 1048576.0, out ? out->file_size() / 1048576.0 : 0.0, secs);
  return 0;
}

Register reg({"prune", "remove FFN channels and heads, or zero small weights, of a GGUF model",
              prune_main});

}  // namespace
}  // namespace nexus::cli
