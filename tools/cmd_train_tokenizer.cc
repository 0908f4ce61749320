// `nexus train-tokenizer -i corpus.txt --vocab N -o tok.gguf`: trains a byte-level BPE vocabulary
// and writes it as a vocab-only GGUF that every command taking -m TOKENIZER accepts.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "command.h"
#include "nexus/io/mapped_file.h"
#include "nexus/tokenizer.h"
#include "nexus/tokenizer/bpe_trainer.h"

namespace nexus::cli {
namespace {


int train_tokenizer_main(int argc, char** argv) {
  CLI::App app{"Train a byte-level BPE tokenizer (GPT-2 style) on a text corpus",
               "nexus train-tokenizer"};
  std::vector<std::string> inputs;
  std::string output;
  tok::BpeTrainerOptions opt;
  app.add_option("-i,--input", inputs, "corpus file(s), each one document; any bytes are accepted")
      ->required();
  app.add_option("-o,--output", output, "vocab-only GGUF to write")->required();
  app.add_option("--vocab", opt.vocab_size, "vocabulary size: 256 bytes + specials + merges")
      ->required();
  app.add_option("--pre", opt.pre, "pre-tokenizer: gpt2, llama-bpe, qwen2 (or any known name)")
      ->capture_default_str();
  app.add_option("--min-frequency", opt.min_frequency,
                 "stop when the most frequent pair occurs fewer times")
      ->capture_default_str();
  opt.threads = static_cast<int>(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  app.add_option("-t,--threads", opt.threads, "pre-tokenization threads")->capture_default_str();
  app.add_option("--special", opt.specials,
                 "extra control tokens (<|endoftext|> is always added and is BOS/EOS)");
  if (auto code = parse_args(app, argc, argv, "train-tokenizer")) return *code;
  if (auto m = overwrites_source(output, inputs)) return fail("train-tokenizer", *m, kUsageError);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<MappedFile>> files;
  std::vector<std::string_view> documents;
  size_t total = 0;
  for (const std::string& path : inputs) {
    auto f = MappedFile::open(path);
    if (!f) return fail("train-tokenizer", f.status().message());
    documents.emplace_back(reinterpret_cast<const char*>(f.value()->data()), f.value()->size());
    total += f.value()->size();
    files.push_back(std::move(f.value()));
  }
  auto vocab = tok::train_bpe(documents, opt);
  if (!vocab) return fail("train-tokenizer", vocab.status().message());
  const std::vector<uint8_t> image = tok::bpe_vocab_to_gguf(vocab.value());
  if (Status st = write_file_atomic(output, image.data(), image.size()); !st)
    return fail("train-tokenizer", st.message());
  // Read it back as every user will, so a file we cannot load is never left behind silently.
  auto check = Tokenizer::load(output);
  if (!check)
    return fail("train-tokenizer", "wrote an unreadable file: " + check.status().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const tok::BpeVocab& v = vocab.value();
  std::fprintf(stderr,
               "train-tokenizer: %zu bytes, %lld words (%lld distinct), pre-tokenizer %s\n"
               "train-tokenizer: %zu tokens (%zu merges) -> %s in %.2f s\n",
               total, static_cast<long long>(v.n_words), static_cast<long long>(v.n_unique_words),
               v.pre.c_str(), v.tokens.size(), v.merges.size(), output.c_str(), secs);
  if (static_cast<int64_t>(v.tokens.size()) < opt.vocab_size)
    std::fprintf(stderr,
                 "train-tokenizer: note: stopped below --vocab %lld: no pair occurs %lld times "
                 "or more\n",
                 static_cast<long long>(opt.vocab_size), static_cast<long long>(opt.min_frequency));
  return 0;
}

Register reg({"train-tokenizer", "train a byte-level BPE vocabulary (vocab-only GGUF)",
              train_tokenizer_main});

}  // namespace
}  // namespace nexus::cli
