// `nexus gen-model`: writes a random-weight benchmark model (L15M, L110M, Q06B or a custom shape)
// as GGUF in one of the benchmark file types; see docs/BENCHMARKS.md.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "command.h"
#include "harness/random_model.h"

namespace nexus::cli {
namespace {

int gen_model_main(int argc, char** argv) {
  CLI::App app{"Write a random-weight GGUF model for benchmarks (normal(0, 0.02) weights)",
               "nexus gen-model"};
  std::string shape_spec, type_name, out;
  uint64_t seed = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool pure = false, quiet = false;
  app.add_option("--shape", shape_spec,
                 "L15M | L110M | Q06B | custom:arch=llama,dim=64,layers=2,heads=4,kv_heads=4,"
                 "head_dim=16,ffn=128,vocab=512,ctx=2048,tied=1")
      ->required();
  app.add_option("--type", type_name, "f32 | f16 | q8_0 | q4_0 | q4_k (= Q4_K_M mix)")->required();
  app.add_option("-o,--output", out, "output GGUF file")->required();
  app.add_option("--seed", seed, "random seed (the file depends only on shape, type and seed)");
  app.add_option("-t,--threads", threads, "generator threads");
  app.add_flag("--pure", pure, "every matrix in the target type (llama-quantize --pure)");
  app.add_flag("-q,--quiet", quiet, "print nothing on success");
  if (auto code = parse_args(app, argc, argv, "gen-model")) return *code;
  auto shape = parse_model_shape(shape_spec);
  if (!shape) return fail("gen-model", shape.status().message());
  auto type = parse_model_file_type(type_name);
  if (!type)
    return fail("gen-model", "unknown --type '" + type_name + "' (f32, f16, q8_0, q4_0, q4_k)");
  if (threads < 1) return fail("gen-model", "--threads must be >= 1");
  GenModelOptions opts;
  opts.shape = shape.value();
  opts.type = *type;
  opts.seed = seed;
  opts.pure = pure;
  opts.n_threads = threads;
  GenModelStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = write_random_model(opts, out, &stats);
  if (!st) return fail("gen-model", st.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet)
    std::printf("wrote %s: %s %s %s, %.2f M params, %d tensors, %.2f MiB in %.1f s\n", out.c_str(),
                opts.shape.arch.c_str(), opts.shape.name.c_str(),
                llama_ftype_name(llama_ftype_id(opts.type)).c_str(), stats.n_params / 1e6,
                stats.n_tensors, stats.file_bytes / 1048576.0, secs);
  return 0;
}

Register reg({"gen-model", "write a random-weight GGUF benchmark model (L15M, L110M, Q06B, custom)",
              gen_model_main});

}  // namespace
}  // namespace nexus::cli
