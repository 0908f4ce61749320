// `nexus quantize IN.gguf OUT.gguf TYPE`: llama-quantize's types and mixes, a line of progress per
// tensor, rows that do not fit a block kept in a type whose block they fit; written atomically.
// W8A8 (int8 weights and activations) takes its static activation scales from --calib.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/compress/quantize.h"
#include "nexus/compress/w8a8.h"
#include "nexus/io/gguf.h"
#include "nexus/io/mapped_file.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

int quantize_main(int argc, char** argv) {
  CLI::App app{"Quantize a GGUF model to a type or a llama-quantize mix", "nexus quantize"};
  app.footer("Types: " + quant_mix_names() +
             "\nExamples:\n  nexus quantize model-f32.gguf model-q4_k_m.gguf Q4_K_M"
             "\n  nexus quantize model-f32.gguf model-w8a8.gguf W8A8 --calib calib.txt "
             "--calib-method percentile");
  std::string input, output, type, imatrix_path;
  bool pure = false, quiet = false;
  std::vector<std::string> tensor_types;
  app.add_option("input", input, "GGUF model to quantize")->required();
  app.add_option("output", output, "GGUF file to write")->required();
  app.add_option("type", type, "target type or mix (Q4_K_M, Q8_0, ...)")->required();
  app.add_flag("--pure", pure, "every matrix in the base type (no Q6_K head, no raised tensors)");
  app.add_option("--tensor-type", tensor_types,
                 "PATTERN=TYPE: tensors whose name matches the regex get TYPE (repeatable)");
  app.add_option("--imatrix", imatrix_path,
                 "importance matrix (nexus imatrix or llama-imatrix GGUF) weighting the rounding");
  app.add_flag("-q,--quiet", quiet, "no line per tensor");
  std::string calib_path, calib_method = "minmax";
  W8A8CalibOptions calib;
  calib.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--calib", calib_path,
                 "W8A8: calibration text; fixes each matrix's activation scale (static) instead "
                 "of taking it per token at run time (dynamic)");
  app.add_option("--calib-method", calib_method, "W8A8: minmax or percentile")
      ->capture_default_str();
  app.add_option("--percentile", calib.percentile, "W8A8: percentile of |x| for percentile")
      ->capture_default_str();
  app.add_option("--calib-ctx", calib.n_ctx, "W8A8: tokens per calibration chunk")
      ->capture_default_str();
  app.add_option("--calib-chunks", calib.chunks, "W8A8: calibration chunks (-1: the whole text)")
      ->capture_default_str();
  app.add_option("-t,--threads", calib.n_threads, "W8A8: threads for calibration")
      ->capture_default_str();
  if (auto code = parse_args(app, argc, argv, "quantize")) return *code;

  const std::optional<QuantMix> mix = parse_quant_mix(type);
  if (!mix)
    return fail("quantize", "unknown type '" + type + "' (types: " + quant_mix_names() + ")",
                kUsageError);
  const std::optional<CalibMethod> method = parse_calib_method(calib_method);
  if (!method)
    return fail("quantize",
                "--calib-method must be minmax or percentile, got '" + calib_method + "'",
                kUsageError);
  calib.method = *method;
  if (!calib_path.empty() && !mix->w8a8)
    return fail("quantize", "--calib is for W8A8, not " + mix->name, kUsageError);
  if (!(calib.percentile > 0.0 && calib.percentile <= 100.0))
    return fail("quantize",
                "--percentile must be in (0, 100], got " + std::to_string(calib.percentile),
                kUsageError);
  if (calib.n_ctx < 2 || calib.chunks == 0 || calib.chunks < -1 || calib.n_threads < 1)
    return fail("quantize", "--calib-ctx must be >= 2, --calib-chunks -1 or >= 1, -t >= 1",
                kUsageError);
  QuantizeOptions o{*mix, pure, {}, nullptr, {}, {}};
  for (const std::string& spec : tensor_types) {
    auto ov = parse_tensor_type(spec);
    if (!ov) return fail("quantize", ov.status().message(), kUsageError);
    o.overrides.push_back(std::move(ov).value());
  }
  if (auto m = overwrites_source(output, {input, calib_path}))
    return fail("quantize", *m, kUsageError);
  auto in = GgufFile::open(input);
  if (!in) return fail("quantize", in.status().message());
  Imatrix imatrix;
  if (!imatrix_path.empty()) {
    auto m = read_imatrix(imatrix_path);
    if (!m) return fail("quantize", m.status().message());
    imatrix = std::move(m).value();
    o.imatrix = &imatrix;
  }
  if (!calib_path.empty()) {
    auto text = read_file(calib_path);
    if (!text) return fail("quantize", text.status().message());
    auto model = Model::load(input);
    if (!model) return fail("quantize", model.status().message());
    auto tok = Tokenizer::from_gguf((*model)->gguf());
    if (!tok) return fail("quantize", tok.status().message());
    auto scales = calibrate_w8a8(**model, **tok, *text, calib, [&](int64_t done, int64_t total) {
      if (!quiet)
        std::fprintf(stderr, "calibration: chunk %lld/%lld\n", static_cast<long long>(done),
                     static_cast<long long>(total));
    });
    if (!scales) return fail("quantize", scales.status().message());
    o.act_scales = std::move(scales).value();
    o.calibration = calib.method == CalibMethod::kMinMax
                        ? "minmax"
                        : "percentile " + std::to_string(calib.percentile);
    o.calibration += ", " + calib_path;
  }

  const auto t0 = std::chrono::steady_clock::now();
  size_t bytes_in = 0, bytes_out = 0;
  auto w = quantize_gguf(in.value(), o, [&](const QuantizeProgress& p) {
    bytes_in += p.tensor->nbytes;
    bytes_out += p.bytes_out;
    if (quiet) return;
    std::string shape;
    for (size_t i = 0; i < p.tensor->shape.size(); ++i)
      shape += (i ? " x " : "") + std::to_string(p.tensor->shape[i]);
    std::fprintf(stderr, "[%4zu/%4zu] %-32s %-14s %5s -> %-5s %9.3f MiB%s\n", p.index, p.count,
                 p.tensor->name.c_str(), shape.c_str(),
                 std::string(dtype_name(p.tensor->dtype)).c_str(),
                 std::string(dtype_name(p.to)).c_str(), p.bytes_out / 1048576.0,
                 p.imatrix ? "  (imatrix)" : "");
  });
  if (!w) return fail("quantize", w.status().message());
  if (Status s = w->write(output); !s) return fail("quantize", s.message());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quantize: %s -> %s (%s): %.2f MiB -> %.2f MiB in %.1f s\n", input.c_str(),
              output.c_str(), mix->name.c_str(), bytes_in / 1048576.0, bytes_out / 1048576.0,
              secs);
  return 0;
}

Register reg({"quantize", "quantize a GGUF model to a type or a llama-quantize mix",
              quantize_main});

}  // namespace
}  // namespace nexus::cli
