// The calibration pass that importance matrices and W8A8 activation scales share: a model run
// over a text in chunks while a MatmulObserver sees every matmul's activations.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/tokenizer.h"
#include "ops/matmul.h"

namespace nexus {

// `text` tokenized (no BOS added) and cut into chunks of n_ctx tokens (at most max_chunks; -1:
// all of them), each decoded from an empty cache with BOS written over its first token, as
// llama-imatrix does, while `observer` is the process's matmul observer. `progress(done, total)`
// after each chunk. Returns the chunks run; errors start with `who` ("imatrix: ...") and name a
// chunk size below 2 or a text shorter than one chunk.
Result<int64_t> run_calibration(const Model& model, const Tokenizer& tok, std::string_view text,
                                int64_t n_ctx, int64_t max_chunks, int n_threads,
                                MatmulObserver& observer, const std::string& who,
                                const std::function<void(int64_t, int64_t)>& progress);

}  // namespace nexus
