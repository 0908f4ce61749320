// `nexus export`: turns a training checkpoint into an F32 GGUF model (with its tokenizer) that
// `nexus run` loads.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "nexus/io/gguf.h"
#include "nexus/tokenizer.h"
#include "nexus/train/checkpoint.h"
#include "nexus/train/token_file.h"

namespace nexus::cli {
namespace {

int export_main(int argc, char** argv) {
  CLI::App app{"Export a training checkpoint as a GGUF model", "nexus export"};
  std::string ckpt_path, out, tok_path;
  app.add_option("--checkpoint", ckpt_path, "checkpoint file, or a directory (its newest)")
      ->required();
  app.add_option("-o,--out", out, "output GGUF model")->required();
  app.add_option("--tokenizer", tok_path,
                 "GGUF whose tokenizer to embed (default: the checkpoint's own)");
  if (auto code = parse_args(app, argc, argv, "export")) return *code;

  if (std::filesystem::is_directory(ckpt_path)) {
    auto latest = train::latest_checkpoint(ckpt_path);
    if (!latest) return fail("export", latest.status().message());
    ckpt_path = latest.value();
  }
  if (auto m = overwrites_source(out, {ckpt_path, tok_path}))
    return fail("export", *m, kUsageError);
  auto ckpt = train::Checkpoint::open(ckpt_path);
  if (!ckpt) return fail("export", ckpt.status().message());
  const train::Checkpoint& c = ckpt.value();
  const train::TrainSettings& s = c.settings();

  std::optional<GgufFile> tok_file;
  const GgufFile* tokenizer_source = c.has_tokenizer() ? &c.file() : nullptr;
  if (!tok_path.empty()) {
    auto tf = GgufFile::open(tok_path);
    if (!tf) return fail("export", tf.status().message());
    tok_file = std::move(tf).value();
    auto tok = Tokenizer::from_gguf(*tok_file);
    if (!tok) return fail("export", tok_path + ": " + tok.status().message());
    if (s.tokenizer_fingerprint != 0 &&
        tokenizer_fingerprint(*tok.value()) != s.tokenizer_fingerprint)
      return fail("export", tok_path + " is not the vocabulary " + c.path() + " was trained with");
    tokenizer_source = &*tok_file;
  }
  if (!tokenizer_source) return fail("export", c.path() + " holds no tokenizer; give --tokenizer");

  // A batch-1 model is enough to hold the parameters; seq as in training keeps context_length.
  auto model = train::TrainModel::create(s.model, 1, s.seq);
  if (!model) return fail("export", model.status().message());
  if (Status st = c.restore_model(*model.value()); !st) return fail("export", st.message());
  if (Status st = model.value()->export_gguf(out, tokenizer_source); !st)
    return fail("export", st.message());
  std::printf("wrote %s (step %lld of %lld, %zu parameters)\n", out.c_str(),
              static_cast<long long>(c.progress().step), static_cast<long long>(s.steps),
              model.value()->params().size());
  return 0;
}

Register reg({"export", "export a training checkpoint as a GGUF model", export_main});

}  // namespace
}  // namespace nexus::cli
