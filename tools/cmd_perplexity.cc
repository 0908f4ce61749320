// `nexus perplexity`: perplexity of a GGUF model over a text file, chunked as llama.cpp's
// llama-perplexity does (runtime/perplexity.h); progress and the estimate go to stdout.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "command.h"
#include "nexus/io/mapped_file.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"
#include "nexus/runtime/perplexity.h"

namespace nexus::cli {
namespace {

int perplexity_main(int argc, char** argv) {
  CLI::App app{"Perplexity of a GGUF model over a text file (llama-perplexity's chunks)",
               "nexus perplexity"};
  std::string model_path, text_file, kv_type = "f16";
  int64_t n_ctx = 512, n_batch = 512, chunks = -1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool no_bos = false;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-f,--file", text_file, "text to evaluate")->required();
  app.add_option("-c,--ctx-size", n_ctx, "tokens per chunk; the second half of each is scored")
      ->capture_default_str();
  app.add_option("-b,--batch-size", n_batch, "tokens per forward pass")->capture_default_str();
  app.add_option("--chunks", chunks, "chunks to evaluate (-1: all)")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads")->capture_default_str();
  app.add_option("--kv-type", kv_type, "KV cache type: f16, f32 or q8_0")->capture_default_str();
  int64_t kv_block = 0;
  app.add_option("--kv-block", kv_block, "KV cache block size in positions (0: the context)")
      ->capture_default_str();
  app.add_flag("--no-bos", no_bos,
               "keep each chunk's first token (default: BOS replaces it when "
               "the model adds BOS)");
  if (auto code = parse_args(app, argc, argv, "perplexity")) return *code;
  if (threads < 1) return fail("perplexity", "-t must be >= 1, got " + std::to_string(threads));
  if (n_ctx < 4) return fail("perplexity", "-c must be >= 4, got " + std::to_string(n_ctx));
  if (n_batch < 1) return fail("perplexity", "-b must be >= 1, got " + std::to_string(n_batch));
  if (chunks == 0 || chunks < -1)
    return fail("perplexity", "--chunks must be -1 or >= 1, got " + std::to_string(chunks));
  const auto kv = kv_cache_type(kv_type);
  if (!kv) return fail("perplexity", "--kv-type must be f16, f32 or q8_0, got '" + kv_type + "'");
  auto text = read_file(text_file);
  if (!text) return fail("perplexity", text.status().message());

  auto model = Model::load(model_path);
  if (!model) return fail("perplexity", model.status().message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail("perplexity", tok.status().message());
  const auto t0 = std::chrono::steady_clock::now();
  // As llama-perplexity: the model's specials added to the whole text (BOS first when it asks
  // for one), then BOS written over the first token of every chunk.
  const std::vector<int32_t> tokens = (*tok)->encode(*text, !no_bos);
  std::fprintf(stderr, "perplexity: %zu tokens tokenized in %.2f s\n", tokens.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // Before the context (its KV cache holds -c positions): a text of less than one chunk.
  if (static_cast<int64_t>(tokens.size()) < n_ctx)
    return fail("perplexity", "the text has " + std::to_string(tokens.size()) +
                                  " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                                  " (lower -c or give more text)");

  ContextOptions co;
  co.n_ctx = n_ctx;
  co.kv_type = *kv;
  co.kv_block = kv_block;
  co.n_threads = threads;
  co.max_batch = std::min(n_batch, n_ctx);
  auto ctx = Context::create(**model, co);
  if (!ctx) return fail("perplexity", ctx.status().message());
  PerplexityOptions po;
  po.n_ctx = n_ctx;
  po.n_batch = co.max_batch;
  po.max_chunks = chunks;
  po.bos = !no_bos && (*tok)->add_bos() ? (*tok)->bos_id() : -1;
  const int64_t available = static_cast<int64_t>(tokens.size()) / n_ctx;
  std::fprintf(stderr,
               "perplexity: %lld chunks of %lld tokens (%lld in the text), batch %lld, %d "
               "threads\n",
               static_cast<long long>(chunks < 0 ? available : std::min(available, chunks)),
               static_cast<long long>(n_ctx), static_cast<long long>(available),
               static_cast<long long>(po.n_batch), threads);
  const auto t1 = std::chrono::steady_clock::now();
  auto r = perplexity(**ctx, tokens, po, [](int64_t c, const PerplexityResult& so_far) {
    std::printf("[%lld]%.4f,", static_cast<long long>(c + 1), so_far.ppl);
    std::fflush(stdout);
  });
  std::printf("\n");
  if (!r) return fail("perplexity", r.status().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %lld chunks)\n", r->ppl,
              r->ppl_stderr, static_cast<long long>(r->n_scored),
              static_cast<long long>(r->n_chunks));
  std::fprintf(stderr, "perplexity: %.2f s, %.1f tokens/s evaluated\n", secs,
               secs > 0 ? static_cast<double>(r->n_chunks * n_ctx) / secs : 0.0);
  return 0;
}

Register reg({"perplexity", "perplexity of a model over a text file (llama-perplexity's chunks)",
              perplexity_main});

}  // namespace
}  // namespace nexus::cli
