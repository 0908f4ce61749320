// Arguments of the vector search op (ops/similarity.h): the k stored rows with the largest inner
// product with each query. With L2-normalised rows and queries that is cosine top-k.
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus {

// The rows are kF32, kF16 (IEEE half) or kI8 with a per-row f32 scale (row value = int8 * scale).
// score(q, i) = sum_c queries[q][c] * row_i[c] (times scales[i] for kI8). For each query the k
// best rows, best first; equal scores by smaller row index; where there are fewer than k rows
// the rest of the row is id -1, score -inf.
struct TopKArgs {
  const float* queries;  // [nq][dim]
  int64_t nq, dim;
  const void* rows;  // [n][dim] of `type`
  DType type;
  const float* scales;  // [n] for kI8, else unused
  int64_t n, k;
  float* scores;  // [nq][k]
  int64_t* ids;   // [nq][k]
};

}  // namespace nexus
