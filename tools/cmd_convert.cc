// `nexus convert`: import a Hugging Face checkpoint folder or a llama2.c checkpoint into GGUF, or
// change a GGUF's weight type. The output is written atomically (temporary file, fsync, rename).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <map>

#include "command.h"
#include "nexus/compress/gguf_convert.h"
#include "nexus/compress/hf_convert.h"
#include "nexus/io/gguf.h"
#include "nexus/io/llama2c.h"

namespace nexus::cli {
namespace {

int convert_main(int argc, char** argv) {
  CLI::App app{"Convert models to GGUF or change a GGUF's weight type", "nexus convert"};
  app.footer(
      "examples:\n"
      "  nexus convert --hf Qwen3-0.6B/ -o qwen3-0.6b.gguf\n"
      "  nexus convert --hf TinyLlama/ -o tinyllama-q8_0.gguf --type q8_0\n"
      "  nexus convert --llama2c stories260K.bin --tokenizer tok512.bin -o stories260K.gguf\n"
      "  nexus convert -i model.gguf -o model-f16.gguf --type f16");
  std::string hf, llama2c, tokenizer, input, output, type_name;
  app.add_option("--hf", hf,
                 "Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json): "
                 "Llama, Qwen2, Qwen3, GPT-2");
  app.add_option("--llama2c", llama2c, "llama2.c checkpoint (legacy export format)");
  app.add_option("--tokenizer", tokenizer, "llama2.c tokenizer.bin (with --llama2c)");
  app.add_option("-i,--input", input, "GGUF file to convert");
  app.add_option("-o,--output", output, "GGUF file to write (required)");
  app.add_option(
      "--type", type_name,
      "weight type of matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, "
      "q4_k, q5_k, q6_k (1-D tensors stay F32; rows that do not fill a block fall back to "
      "q8_0 or f16); with --hf the default is bf16 for a bf16 checkpoint, else f16");
  if (auto code = parse_args(app, argc, argv, "convert")) return *code;
  if (output.empty()) return fail("convert", "-o OUT.gguf is required", kUsageError);
  if (int(!hf.empty()) + int(!llama2c.empty()) + int(!input.empty()) != 1)
    return fail("convert", "give exactly one of --hf DIR, --llama2c MODEL.bin or -i IN.gguf",
                kUsageError);
  if (!llama2c.empty() && tokenizer.empty())
    return fail("convert", "--llama2c needs --tokenizer TOKENIZER.bin", kUsageError);
  if (llama2c.empty() && !tokenizer.empty())
    return fail("convert", "--tokenizer only applies to --llama2c", kUsageError);
  if (!input.empty() && type_name.empty())
    return fail("convert", "-i needs --type (f32, f16, bf16, q8_0, q4_0, q4_k, ...)", kUsageError);
  std::vector<std::string> sources = {input, llama2c, tokenizer};
  if (!hf.empty()) {  // every file of the checkpoint folder is an input
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(hf, ec))
      if (e.is_regular_file(ec)) sources.push_back(e.path().string());
  }
  if (auto m = overwrites_source(output, sources)) return fail("convert", *m, kUsageError);
  std::optional<DType> type;
  if (!type_name.empty()) {
    type = dtype_from_name(type_name);
    if (!type)
      return fail("convert",
                  "unknown --type '" + type_name + "' (use f32, f16, bf16, q8_0, q4_0, q4_k, ...)",
                  kUsageError);
    if (!is_weight_target(*type))
      return fail("convert", "--type " + type_name + " is not a supported weight type",
                  kUsageError);
  }

  std::optional<GgufWriter> writer;
  if (!hf.empty()) {
    HfConvertOptions opt;
    opt.type = type;
    opt.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    auto r = convert_hf(hf, opt);
    if (!r) return fail("convert", r.status().message());
    std::fprintf(stderr, "%s: %s, matrices %s, vocabulary %s\n", hf.c_str(),
                 r->architecture.c_str(), std::string(dtype_name(r->type)).c_str(),
                 r->vocab.c_str());
    writer = std::move(r->writer);
  }

  // Otherwise the source is a llama2.c import (all F32) or a GGUF file.
  std::vector<uint8_t> imported;
  Result<GgufFile> source = Status::error("no source");
  if (!writer && !llama2c.empty()) {
    auto w = import_llama2c(llama2c, tokenizer);
    if (!w) return fail("convert", w.status().message());
    if (!type || *type == DType::kF32) {
      writer = std::move(w).value();
    } else {
      imported = w->serialize();
      source = GgufFile::parse(imported, nullptr, llama2c);
    }
  } else if (!writer) {
    source = GgufFile::open(input);
  }
  if (!writer) {
    if (!source) return fail("convert", source.status().message());
    auto w = convert_gguf(source.value(), *type);
    if (!w) return fail("convert", w.status().message());
    writer = std::move(w).value();
  }
  if (Status s = writer->write(output); !s) return fail("convert", s.message());

  auto out = GgufFile::open(output);
  if (!out) return fail("convert", "wrote an unreadable file: " + out.status().message());
  std::map<std::string, int> by_type;
  for (const auto& t : out->tensors()) by_type[std::string(dtype_name(t.dtype))]++;
  std::string types;
  for (const auto& [name, n] : by_type)
    types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::printf("wrote %s: %zu tensors (%s), %.2f MiB\n", output.c_str(), out->tensors().size(),
              types.c_str(), out->file_size() / 1048576.0);
  return 0;
}

Register reg({"convert", "import a llama2.c checkpoint, or change a GGUF's weight type",
              convert_main});

}  // namespace
}  // namespace nexus::cli
