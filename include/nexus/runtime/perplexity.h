// Perplexity of a model over a token stream, as llama.cpp's `llama-perplexity` measures it: the
// text is cut into chunks of n_ctx tokens, each evaluated from an empty cache, and only the
// second half of each chunk is scored (every scored token then sees at least n_ctx / 2 tokens
// of context). PPL = exp(mean negative log-likelihood of the scored tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "nexus/context.h"
#include "nexus/status.h"

namespace nexus {

struct PerplexityOptions {
  int64_t n_ctx = 512;      // tokens per chunk (at most the context's n_ctx)
  int64_t n_batch = 512;    // tokens per decode() call (at most the context's max_batch)
  int64_t max_chunks = -1;  // chunks to evaluate; -1: every whole chunk of the text
  int32_t bos = -1;         // >= 0: the first token of every chunk becomes this one (llama.cpp)
};

struct PerplexityResult {
  int64_t n_chunks = 0;   // chunks evaluated
  int64_t n_scored = 0;   // tokens scored
  double mean_nll = 0;    // nats per scored token
  double nll_stderr = 0;  // standard error of mean_nll
  double ppl = 0;         // exp(mean_nll)
  double ppl_stderr = 0;  // ppl * nll_stderr (first-order)
};

// After each chunk: its index (0-based) and the estimate so far.
using PerplexityProgress = std::function<void(int64_t chunk, const PerplexityResult& so_far)>;

// Evaluates ctx's model on `tokens` (sequence 0 of ctx, cleared before every chunk). Errors: a
// text shorter than one chunk, n_ctx < 4 or beyond the context, n_batch < 1, a token id outside
// the vocabulary.
Result<PerplexityResult> perplexity(Context& ctx, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts,
                                    const PerplexityProgress& progress = {});

// Negative log-likelihood of `target` under the logits `row` (n_vocab floats): log-sum-exp minus
// the target's logit, in double precision.
double token_nll(std::span<const float> row, int32_t target);

}  // namespace nexus
