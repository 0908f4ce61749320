// Arguments of the rotary position embedding op, shared by the front-end (ops/rope.h) and every
// backend.
#pragma once

#include <cstdint>

#include "nexus/config.h"

namespace nexus {

// Rotates the first rope_dim values of each of n_heads heads (head_dim apart) of each of `rows`
// rows of x in place: normal style rotates adjacent pairs (x[2i], x[2i+1]) (llama), NeoX style
// (x[i], x[i + rope_dim/2]) (qwen). Row r takes its angles from row r % cs_rows of the table cs
// [cs_rows][rope_dim/2][{cos, sin}] (see rope_table). With `inverse` it rotates by the negated
// angles: the transpose, which is the backward of the forward.
struct RopeArgs {
  float* x;
  int64_t rows, n_heads, head_dim, rope_dim;
  RopeStyle style;
  const float* cs;
  int64_t cs_rows;
  bool inverse;
};

}  // namespace nexus
