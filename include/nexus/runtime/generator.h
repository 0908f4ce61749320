// Text generation: tokenize the prompt, prefill it, then sample and decode one token at a time,
// streaming text as soon as it is safe to show (complete UTF-8, not part of a stop string).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/context.h"
#include "nexus/status.h"
#include "nexus/tokenizer.h"
#include "nexus/runtime/sampler.h"

namespace nexus {

struct GenerateOptions {
  SamplerParams sampler;
  int64_t n_predict = -1;          // tokens to generate; -1 = until end-of-generation or context end
  std::vector<std::string> stop;   // stop strings (not emitted)
  bool add_bos = true;             // prepend BOS when the tokenizer asks for it
  bool ignore_eos = false;         // keep generating past end-of-generation tokens
  int64_t n_batch = 512;           // prompt tokens per decode() call during prefill
  int seq = 0;                     // sequence slot in the context
  // Speculative decoding by prompt lookup: when the last lookup_ngram tokens occurred earlier,
  // the tokens that followed (up to lookup_max) are verified in the same decode() call. The output
  // is the same as without (0: off).
  int lookup_ngram = 0;
  int lookup_max = 8;
  // Speculative decoding with a draft model: `draft` is a context of a model with the same
  // vocabulary (its slot `seq` is used); it proposes draft_max tokens greedily, verified the same
  // way, so the output is the same as without. Takes precedence over lookup_ngram.
  Context* draft = nullptr;
  int draft_max = 4;
};

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::string stop_reason;  // "eos", "stop", "length", "context"
  std::vector<int32_t> tokens;  // generated token ids
  int64_t drafted = 0, accepted = 0;  // prompt lookup: draft tokens verified and accepted
  int64_t decode_calls = 0;           // decode() calls after the prompt
};

// Whether speculative decoding (a draft model or prompt lookup) can run on `c`: it rolls rejected
// tokens back, which a state-space model's recurrent state cannot do yet (an error says so).
Status speculation_supported(const ModelConfig& c);

// Runs generation on `ctx` (the sequence slot is cleared first). `on_text` receives the streamed
// text; returning false from it stops generation. An empty prompt starts from BOS.
Result<GenerateStats> generate(Context& ctx, const Tokenizer& tok, std::string_view prompt,
                               const GenerateOptions& opts,
                               const std::function<bool(std::string_view)>& on_text);

}  // namespace nexus
