// `nexus tokenize-data -i corpus.txt -m TOKENIZER -o data.bin [--val-fraction F]`: tokenizes a
// corpus in chunks (in parallel) into memory-mappable token files for training.
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
#include "nexus/train/token_file.h"

namespace nexus::cli {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr size_t kProgressMinBytes = size_t{16} << 20;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "data.bin" -> "data.val.bin"; other names get ".val" appended.
std::string val_path_for(const std::string& out) {
  const std::string ext = ".bin";
  if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0)
    return out.substr(0, out.size() - ext.size()) + ".val.bin";
  return out + ".val";
}

struct Progress {
  size_t total = 0, done = 0;
  Clock::time_point start = Clock::now(), last = Clock::now();
  bool enabled = false;
  void advance(size_t bytes, uint64_t tokens) {
    done += bytes;
    if (!enabled || seconds_since(last) < 1.0) return;
    last = Clock::now();
    std::fprintf(stderr, "tokenize-data: %5.1f%%  %.1f MB  %llu tokens  %.1f MB/s\n",
                 100.0 * static_cast<double>(done) / static_cast<double>(total),
                 static_cast<double>(done) / 1e6, static_cast<unsigned long long>(tokens),
                 static_cast<double>(done) / 1e6 / seconds_since(start));
  }
};

// Tokenizes `text` chunk by chunk (chunks cut where pre-tokenization is unaffected), `threads`
// chunks at a time, appending the ids in order.
Status tokenize_into(const Tokenizer& tok, std::string_view text, int threads, TokenFileWriter* out,
                     Progress* progress) {
  // SentencePiece-style models put a space before the text they are given, so they get each
  // document whole; the other models give the same ids for the chunks as for the whole text.
  const std::vector<size_t> ends = tok.kind() == TokenizerKind::kSpm
                                       ? std::vector<size_t>{text.size()}
                                       : tok::safe_chunk_ends(text, kChunkBytes);
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(threads));
  for (size_t first = 0; first < ends.size(); first += static_cast<size_t>(threads)) {
    const size_t n = std::min(ends.size() - first, static_cast<size_t>(threads));
    auto chunk = [&](size_t i) {
      const size_t b = first + i == 0 ? 0 : ends[first + i - 1];
      return text.substr(b, ends[first + i] - b);
    };
    std::vector<std::thread> pool;
    for (size_t i = 1; i < n; ++i)
      pool.emplace_back([&, i] { ids[i] = tok.encode(chunk(i), false, true); });
    ids[0] = tok.encode(chunk(0), false, true);
    for (std::thread& t : pool) t.join();
    for (size_t i = 0; i < n; ++i) {
      NEXUS_RETURN_IF_ERROR(out->append(ids[i]));
      progress->advance(chunk(i).size(), out->n_tokens());
    }
  }
  return Status::ok();
}

int tokenize_data_main(int argc, char** argv) {
  CLI::App app{"Tokenize a text corpus into a token file for training", "nexus tokenize-data"};
  std::vector<std::string> inputs;
  std::string model, output;
  double val_fraction = 0.0;
  bool append_eos = false;
  int threads = static_cast<int>(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  app.add_option("-i,--input", inputs, "corpus file(s); each file is one document")->required();
  app.add_option("-m,--model", model, "tokenizer: GGUF, tokenizer.json or its directory")
      ->required();
  app.add_option("-o,--output", output, "token file to write (train split)")->required();
  app.add_option("--val-fraction", val_fraction,
                 "fraction of the text (its end, cut at a line start) written to OUT.val.bin")
      ->check(CLI::Range(0.0, 0.5));
  app.add_flag("--append-eos", append_eos, "append the EOS token after each input file");
  app.add_option("-t,--threads", threads, "tokenizer threads")->capture_default_str();
  if (auto code = parse_args(app, argc, argv, "tokenize-data")) return *code;
  threads = std::max(1, threads);
  std::vector<std::string> sources = inputs;
  sources.push_back(model);
  for (const std::string& o : {output, val_path_for(output)})
    if (auto m = overwrites_source(o, sources)) return fail("tokenize-data", *m, kUsageError);
  const auto t0 = Clock::now();
  auto tok = Tokenizer::load(model);
  if (!tok) return fail("tokenize-data", tok.status().message());
  const Tokenizer& t = *tok.value();
  if (append_eos && t.eos_id() < 0)
    return fail("tokenize-data", "--append-eos: the tokenizer has no EOS token");

  std::vector<std::shared_ptr<MappedFile>> files;
  size_t total = 0;
  for (const std::string& path : inputs) {
    auto f = MappedFile::open(path);
    if (!f) return fail("tokenize-data", f.status().message());
    total += f.value()->size();
    files.push_back(std::move(f.value()));
  }
  if (total == 0) return fail("tokenize-data", "the input is empty (0 bytes)");

  // The split: the first byte of the validation text, moved forward to a line start.
  const bool want_val = val_fraction > 0;
  size_t split_file = files.size(), split_at = 0;
  if (want_val) {
    size_t target = total - static_cast<size_t>(val_fraction * static_cast<double>(total));
    for (size_t i = 0; i < files.size(); ++i) {
      const size_t n = files[i]->size();
      if (target >= n && i + 1 < files.size()) {
        target -= n;
        continue;
      }
      const std::string_view text(reinterpret_cast<const char*>(files[i]->data()), n);
      const size_t nl = target == 0 ? 0 : text.find('\n', target - 1);
      split_file = i;
      split_at = nl == std::string_view::npos ? n : (target == 0 ? 0 : nl + 1);
      break;
    }
  }

  const uint64_t hash = tokenizer_fingerprint(t);
  auto train =
      TokenFileWriter::create(output, static_cast<uint64_t>(t.n_vocab()), hash, t.eos_id());
  if (!train) return fail("tokenize-data", train.status().message());
  std::unique_ptr<TokenFileWriter> val;
  if (want_val) {
    auto v = TokenFileWriter::create(val_path_for(output), static_cast<uint64_t>(t.n_vocab()), hash,
                                     t.eos_id());
    if (!v) return fail("tokenize-data", v.status().message());
    val = std::move(v.value());
  }

  Progress progress;
  progress.total = total;
  progress.enabled = total >= kProgressMinBytes;
  const std::vector<int32_t> eos{t.eos_id()};
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string_view text(reinterpret_cast<const char*>(files[i]->data()), files[i]->size());
    TokenFileWriter* first = want_val && i > split_file ? val.get() : train.value().get();
    TokenFileWriter* second = i == split_file ? val.get() : first;
    const size_t cut = i == split_file ? split_at : text.size();
    if (Status st = tokenize_into(t, text.substr(0, cut), threads, first, &progress); !st)
      return fail("tokenize-data", st.message());
    if (Status st = tokenize_into(t, text.substr(cut), threads, second, &progress); !st)
      return fail("tokenize-data", st.message());
    // EOS goes with the document's last byte.
    if (append_eos)
      if (Status st = (cut < text.size() ? second : first)->append(eos); !st)
        return fail("tokenize-data", st.message());
  }
  // Both files or neither: an empty split fails before either is renamed into place.
  if (train.value()->n_tokens() == 0)
    return fail("tokenize-data", "no tokens for '" + output + "'" +
                                     (val ? " (--val-fraction too large?)" : " (empty input?)"));
  if (val && val->n_tokens() == 0)
    return fail("tokenize-data", "no tokens for '" + val_path_for(output) +
                                     "' (--val-fraction too small, or no line break to split at)");
  if (Status st = train.value()->finish(); !st) return fail("tokenize-data", st.message());
  if (val)
    if (Status st = val->finish(); !st) return fail("tokenize-data", st.message());
  const uint64_t n_train = train.value()->n_tokens(), n_val = val ? val->n_tokens() : 0;
  std::fprintf(stderr,
               "tokenize-data: %zu bytes -> %llu tokens (%.2f bytes/token, %s ids, vocab %lld) "
               "in %.2f s\n",
               total, static_cast<unsigned long long>(n_train + n_val),
               static_cast<double>(total) / static_cast<double>(n_train + n_val),
               t.n_vocab() <= 65535 ? "uint16" : "uint32", static_cast<long long>(t.n_vocab()),
               seconds_since(t0));
  std::fprintf(stderr, "tokenize-data: train %s: %llu tokens\n", output.c_str(),
               static_cast<unsigned long long>(n_train));
  if (val)
    std::fprintf(stderr, "tokenize-data: val   %s: %llu tokens\n", val_path_for(output).c_str(),
                 static_cast<unsigned long long>(n_val));
  return 0;
}

Register reg({"tokenize-data", "tokenize a corpus into a token file for training",
              tokenize_data_main});

}  // namespace
}  // namespace nexus::cli
