// Arguments of the embedding op (token rows of a table), shared by the front-end
// (ops/embedding.h) and every backend.
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus {

// out[i, :] = row ids[i] of `table` ({vocab, dim} of `dtype`, any layout with CPU kernels,
// repacked ones included) as f32, for i < n. Every id is in [0, vocab) (the front-end checks).
struct EmbeddingArgs {
  const void* table;
  DType dtype;
  int64_t vocab, dim;
  const int32_t* ids;
  int64_t n;
  float* out;
};

// dtable[ids[i], :] += dout[i, :] for i < n in order (f32 table gradient; repeated ids add up in
// the same order on any thread count).
struct EmbeddingBackwardArgs {
  float* dtable;
  const float* dout;
  const int32_t* ids;
  int64_t n, dim;
};

}  // namespace nexus
