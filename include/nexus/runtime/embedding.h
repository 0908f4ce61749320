// Sentence embeddings from a causal model, as the server's /v1/embeddings and the vector index
// compute them: the mean over the tokens of the final-norm hidden states, L2-normalised.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nexus/context.h"
#include "nexus/status.h"

namespace nexus {

// `tokens` decoded as sequence `seq` of `ctx` (from an empty cache, `max_batch` tokens a call;
// the sequence is cleared again after): model.dim floats. Errors name an empty input or decode's
// failure.
Result<std::vector<float>> embed_tokens(Context& ctx, int seq, std::span<const int32_t> tokens,
                                        int64_t max_batch);

}  // namespace nexus
