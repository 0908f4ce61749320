// Token embedding lookup: dequantizes selected rows of an embedding table of any computable dtype.
#pragma once

#include <cstdint>
#include <span>

#include "nexus/tensor.h"

namespace nexus {

// out[i, :] = table[ids[i], :] as f32, for a 2-D table {vocab, dim}; out holds ids.size() * dim
// floats. Throws nexus::Error naming the id and the vocab size when an id is out of range.
void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out);

}  // namespace nexus
