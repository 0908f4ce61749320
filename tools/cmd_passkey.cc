// `nexus passkey`: synthetic passkey retrieval (RULER's single-needle style). `make` writes
// training text, one sample a line (train --loss-after "The pass key is" trains on the answers):
// samples of at most --length tokens, each a five-digit key stated once at a random
// depth inside filler sentences and asked for at the end, with its answer. `eval` asks a model
// for the keys of fresh samples (greedy) and reports the accuracy, the context's cache and memory
// bytes and the prompt speed.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "command.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/runtime/generator.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

// Our own filler: plain sentences with nothing to remember.
const char* const kFiller[] = {
    "The river runs past the old mill. ",  "Birds sing in the trees at dawn. ",
    "A cart rolls slowly down the lane. ", "The bakers light their ovens early. ",
    "Clouds drift over the quiet hills. ", "The market fills with voices by noon. ",
    "A dog sleeps in the warm doorway. ",  "Rain taps on the roofs of the town. ",
};
constexpr const char* kIntro = "A pass key is hidden in this text. Find it and remember it. ";
constexpr const char* kQuestion = "What is the pass key? The pass key is";

struct Sample {
  std::string prompt;  // up to and including the question
  std::string key;     // five digits
};

// A sample of at most `length` tokens with its answer (counted with `tok`), as close to it as
// whole filler sentences come, with its key at a random depth.
Sample make_sample(const Tokenizer& tok, int64_t length, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> digits(10000, 99999), pick(0, std::size(kFiller) - 1);
  Sample s;
  s.key = std::to_string(digits(rng));
  const std::string needle =
      "The pass key is " + s.key + ". Remember it. " + s.key + " is the pass key. ";
  const auto count = [&](const std::string& t) {
    return static_cast<int64_t>(tok.encode(t, false).size());
  };
  int64_t have = count(kIntro) + count(needle) + count(kQuestion) + count(" " + s.key + ".") + 1;
  std::vector<std::string> filler;
  for (;;) {
    const char* next = kFiller[pick(rng)];
    const int64_t n = count(next);
    if (have + n > length) break;
    filler.emplace_back(next);
    have += n;
  }
  std::uniform_int_distribution<size_t> depth(0, filler.size());
  const size_t at = depth(rng);
  s.prompt = kIntro;
  for (size_t i = 0; i <= filler.size(); ++i) {
    if (i == at) s.prompt += needle;
    if (i < filler.size()) s.prompt += filler[i];
  }
  s.prompt += kQuestion;
  return s;
}

int make_main(const std::string& tok_path, const std::string& out, int64_t min_length,
              int64_t length, int64_t count, uint64_t seed) {
  auto tok = Tokenizer::load(tok_path);
  if (!tok) return fail("passkey", tok.status().message());
  std::mt19937_64 rng(seed);
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return fail("passkey", "cannot write '" + tmp + "'");
    std::uniform_int_distribution<int64_t> lengths(min_length, length);
    for (int64_t i = 0; i < count; ++i) {
      const Sample s = make_sample(**tok, lengths(rng), rng);
      f << s.prompt << " " << s.key << ".\n";
    }
    if (!f.flush()) return fail("passkey", "cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) return fail("passkey", "cannot write '" + out + "': " + ec.message());
  std::fprintf(stderr, "passkey: %lld samples of %lld to %lld tokens in %s\n",
               static_cast<long long>(count), static_cast<long long>(min_length),
               static_cast<long long>(length), out.c_str());
  return 0;
}

int eval_main(const std::string& model_path, int64_t length, int64_t count, uint64_t seed,
              int threads) {
  auto model = Model::load(model_path);
  if (!model) return fail("passkey", model.status().message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail("passkey", tok.status().message());
  ContextOptions co;
  co.n_ctx = length + length / 8 + 64;
  co.n_threads = threads;
  auto ctx = Context::create(**model, co);
  if (!ctx) return fail("passkey", ctx.status().message());
  std::mt19937_64 rng(seed);
  int64_t right = 0, tokens = 0;
  double prefill = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Sample s = make_sample(**tok, length, rng);
    GenerateOptions g;
    g.sampler.temperature = 0;
    g.n_predict = 6;
    (*ctx)->clear_seq(0);
    std::string answer;
    auto st = generate(**ctx, **tok, s.prompt, g, [&](std::string_view t) {
      answer += t;
      return true;
    });
    if (!st) return fail("passkey", st.status().message());
    tokens += st.value().n_prompt;
    prefill += st.value().prefill_seconds;
    const size_t p = answer.find_first_not_of(' ');
    const bool ok = p != std::string::npos && answer.compare(p, s.key.size(), s.key) == 0;
    right += ok ? 1 : 0;
  }
  std::printf(
      "passkey: %lld of %lld right (%.1f%%) at %lld prompt tokens on average; "
      "cache and memory %.1f MiB; prompt %.0f tokens/s\n",
      static_cast<long long>(right), static_cast<long long>(count),
      100.0 * static_cast<double>(right) / static_cast<double>(count),
      static_cast<long long>(tokens / std::max<int64_t>(1, count)),
      static_cast<double>((*ctx)->kv_bytes()) / 1048576.0,
      prefill > 0 ? static_cast<double>(tokens) / prefill : 0.0);
  return 0;
}

int passkey_main(int argc, char** argv) {
  CLI::App app{"Synthetic passkey retrieval: training text (make) and accuracy (eval)",
               "nexus passkey"};
  app.require_subcommand(1);
  std::string tok_path, out, model_path;
  int64_t length = 1024, min_length = 0, count = 100;
  uint64_t seed = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* make = app.add_subcommand("make", "write training text of passkey samples");
  make->add_option("--tokenizer", tok_path, "GGUF whose tokenizer counts the tokens")->required();
  make->add_option("-o,--output", out, "text file to write")->required();
  make->add_option("--min-length", min_length,
                   "lengths uniform from this to --length, a mix for a length curriculum "
                   "(default: --length)");
  CLI::App* eval = app.add_subcommand("eval", "the accuracy of a model on fresh samples");
  eval->add_option("-m,--model", model_path, "GGUF model")->required();
  eval->add_option("-t,--threads", threads, "threads")->capture_default_str();
  for (CLI::App* sub : {make, eval}) {
    sub->add_option("--length", length, "tokens per sample with its answer (at most)")
        ->capture_default_str();
    sub->add_option("-n,--count", count, "samples")->capture_default_str();
    sub->add_option("--seed", seed, "seed of the keys, depths and filler")->capture_default_str();
  }
  if (auto code = parse_args(app, argc, argv, "passkey")) return *code;
  if (length < 64 || count < 1 || threads < 1)
    return fail("passkey", "--length must be >= 64, --count and --threads >= 1", kUsageError);
  if (make->count("--min-length") == 0) min_length = length;
  if (min_length < 64 || min_length > length)
    return fail("passkey", "--min-length must be in [64, --length]", kUsageError);
  if (make->parsed()) return make_main(tok_path, out, min_length, length, count, seed);
  return eval_main(model_path, length, count, seed, threads);
}

Register reg({"passkey", "synthetic passkey retrieval: training text and accuracy", passkey_main});

}  // namespace
}  // namespace nexus::cli
