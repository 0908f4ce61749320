// Chunked perplexity (see perplexity.h).
#include "nexus/runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace nexus {
namespace {

PerplexityResult estimate(double sum, double sum_sq, int64_t n, int64_t chunks) {
  PerplexityResult r;
  r.n_chunks = chunks;
  r.n_scored = n;
  if (n == 0) return r;
  r.mean_nll = sum / static_cast<double>(n);
  const double var = std::max(0.0, sum_sq / static_cast<double>(n) - r.mean_nll * r.mean_nll);
  r.nll_stderr = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = r.ppl * r.nll_stderr;
  return r;
}

}  // namespace

double token_nll(std::span<const float> row, int32_t target) {
  const float mx = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return std::log(sum) + mx - static_cast<double>(row[static_cast<size_t>(target)]);
}

Result<PerplexityResult> perplexity(Context& ctx, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts,
                                    const PerplexityProgress& progress) {
  const std::string w = "[perplexity] ";
  const int64_t n_ctx = opts.n_ctx;
  const int64_t n_vocab = ctx.model().config().n_vocab;
  if (n_ctx < 4 || n_ctx > ctx.options().n_ctx)
    return Status::error(w + "chunk size " + std::to_string(n_ctx) + " must be 4 to " +
                         std::to_string(ctx.options().n_ctx) + " (the context size)");
  if (opts.n_batch < 1 || opts.n_batch > ctx.options().max_batch)
    return Status::error(w + "batch size " + std::to_string(opts.n_batch) + " must be 1 to " +
                         std::to_string(ctx.options().max_batch));
  if (opts.bos >= n_vocab)
    return Status::error(w + "BOS id " + std::to_string(opts.bos) + " is outside the vocabulary");
  const int64_t whole = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (whole == 0)
    return Status::error(w + "the text has " + std::to_string(tokens.size()) +
                         " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                         " (a smaller chunk or more text)");
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return Status::error(w + "token id " + std::to_string(t) + " is outside the vocabulary of " +
                           std::to_string(n_vocab));
  const int64_t n_chunks = opts.max_chunks < 0 ? whole : std::min(whole, opts.max_chunks);
  // Logits at positions [first, n_ctx - 1) predict the tokens at first + 1 .. n_ctx - 1.
  const int64_t first = n_ctx / 2;
  double sum = 0, sum_sq = 0;
  int64_t n = 0;
  Batch batch;
  std::vector<float> logits;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, chunk.begin());
    if (opts.bos >= 0) chunk[0] = opts.bos;
    ctx.clear_seq(0);
    for (int64_t b0 = 0; b0 < n_ctx; b0 += opts.n_batch) {
      const int64_t b1 = std::min(n_ctx, b0 + opts.n_batch);
      batch.clear();
      for (int64_t i = b0; i < b1; ++i)
        batch.add(chunk[i], static_cast<int32_t>(i), 0, i >= first && i < n_ctx - 1);
      if (Status st = ctx.decode(batch, &logits); !st) return st;
      int64_t row = 0;
      for (int64_t i = std::max(b0, first); i < std::min(b1, n_ctx - 1); ++i, ++row) {
        const double nll = token_nll(
            std::span<const float>(logits).subspan(static_cast<size_t>(row * n_vocab), n_vocab),
            chunk[i + 1]);
        sum += nll;
        sum_sq += nll * nll;
        ++n;
      }
    }
    if (progress) progress(c, estimate(sum, sum_sq, n, c + 1));
  }
  return estimate(sum, sum_sq, n, n_chunks);
}

}  // namespace nexus
