// `nexus imatrix -m MODEL -f CALIB.txt -o IMATRIX.gguf`: per weight matrix, the summed squares of
// its input activations over a calibration text (compress/imatrix.h), in llama.cpp's imatrix GGUF
// format, for `nexus quantize --imatrix` (or llama-quantize).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/compress/imatrix.h"
#include "nexus/io/mapped_file.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

int imatrix_main(int argc, char** argv) {
  CLI::App app{"Importance matrix of a GGUF model over a calibration text", "nexus imatrix"};
  app.footer("Example:\n  nexus imatrix -m model-f16.gguf -f calib.txt -o imatrix.gguf\n"
             "  nexus quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M --imatrix imatrix.gguf");
  std::string model_path, text_file, output = "imatrix.gguf";
  ImatrixOptions o;
  o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-f,--file", text_file, "calibration text")->required();
  app.add_option("-o,--output", output, "imatrix GGUF to write")->capture_default_str();
  app.add_option("-c,--ctx-size", o.n_ctx, "tokens per chunk")->capture_default_str();
  app.add_option("--chunks", o.chunks, "chunks to process (-1: the whole text)")
      ->capture_default_str();
  app.add_option("-t,--threads", o.n_threads, "threads")->capture_default_str();
  app.add_flag("--process-output", o.include_output, "also collect the output head's inputs");
  if (auto code = parse_args(app, argc, argv, "imatrix")) return *code;
  if (o.n_threads < 1) return fail("imatrix", "-t must be >= 1, got " + std::to_string(o.n_threads));
  if (o.n_ctx < 2) return fail("imatrix", "-c must be >= 2, got " + std::to_string(o.n_ctx));
  if (o.chunks == 0 || o.chunks < -1)
    return fail("imatrix", "--chunks must be -1 or >= 1, got " + std::to_string(o.chunks));
  if (auto m = overwrites_source(output, {model_path, text_file}))
    return fail("imatrix", *m, kUsageError);
  auto text = read_file(text_file);
  if (!text) return fail("imatrix", text.status().message());
  auto model = Model::load(model_path);
  if (!model) return fail("imatrix", model.status().message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail("imatrix", tok.status().message());
  o.dataset = text_file;
  const auto t0 = std::chrono::steady_clock::now();
  auto m = collect_imatrix(**model, **tok, *text, o, [&](int64_t done, int64_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "imatrix: chunk %lld/%lld, %.1f s, about %.0f s left\n",
                 static_cast<long long>(done), static_cast<long long>(total), s,
                 s / static_cast<double>(done) * static_cast<double>(total - done));
  });
  if (!m) return fail("imatrix", m.status().message());
  if (Status s = write_imatrix(*m, output); !s) return fail("imatrix", s.message());
  std::printf("imatrix: %zu matrices from %lld chunks of %lld tokens -> %s\n", m->entries.size(),
              static_cast<long long>(m->chunk_count), static_cast<long long>(m->chunk_size),
              output.c_str());
  return 0;
}

Register reg({"imatrix", "importance matrix of a model over a calibration text", imatrix_main});

}  // namespace
}  // namespace nexus::cli
