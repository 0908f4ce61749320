// `nexus tokenize -m MODEL (-p TEXT | -f FILE)`: prints the token ids of a text, one "id<TAB>piece"
// per line (pieces as raw bytes) or, with --ids, all ids on one line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "command.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {


int tokenize_main(int argc, char** argv) {
  CLI::App app{"Tokenize a text with a model's tokenizer (GGUF or tokenizer.json)",
               "nexus tokenize"};
  std::string model, prompt, file;
  bool ids_only = false, no_bos = false, no_special = false;
  app.add_option("-m,--model", model, "GGUF model/vocab file, tokenizer.json, or its directory")
      ->required();
  app.add_option("-p,--prompt", prompt, "text to tokenize");
  app.add_option("-f,--file", file, "file whose exact bytes are tokenized");
  app.add_flag("--ids", ids_only, "print only the ids, space-separated on one line");
  app.add_flag("--no-bos", no_bos, "do not add the BOS/EOS tokens the model asks for");
  app.add_flag("--no-special", no_special,
               "treat special-token text such as <|endoftext|> as plain text");
  if (auto code = parse_args(app, argc, argv, "tokenize")) return *code;
  const bool has_prompt = app.count("--prompt") > 0, has_file = app.count("--file") > 0;
  if (has_prompt == has_file)
    return fail("tokenize",
                has_prompt ? "give either -p TEXT or -f FILE, not both"
                           : "no input: give -p TEXT or -f FILE",
                kUsageError);
  std::string text = prompt;
  if (has_file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return fail("tokenize", "cannot open input file '" + file + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto tok = Tokenizer::load(model);
  if (!tok) return fail("tokenize", tok.status().message());
  const std::vector<int32_t> ids = tok.value()->encode(text, !no_bos, !no_special);
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
  }
  for (int32_t id : ids) {
    const std::string piece = tok.value()->token_to_piece(id);
    std::printf("%d\t", id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::printf("\n");
  }
  return 0;
}

Register reg({"tokenize", "token ids of a text (GGUF vocab or tokenizer.json)", tokenize_main});

}  // namespace
}  // namespace nexus::cli
