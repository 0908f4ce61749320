// CPU kernels of causal attention with saved probabilities (backends/api/attention.h): the
// variant tables the op front-end (ops/causal_attention.h) and the op test use, fastest first:
// - tiled_avx512 / tiled_avx2: register tiles (attention_train_tiles.h), every product a fused
//   multiply-add chain in a fixed order, so both give the same bits; full causal only, a head size
//   that is a multiple of 16 / 8. 25-33% faster than the OpenBLAS GEMMs at GPT-2's and L15M's
//   shapes (docs/KERNELS.md);
// - blas: OpenBLAS GEMMs in causal row blocks, for 32 tokens and more (full causal only);
// - avx2: per-(query, key) register kernels (head size a multiple of 8, at most 64);
// - scalar: the reference, sums of the softmax in double.
#pragma once

#include <cstdint>

#include "backends/api/attention.h"
#include "backends/api/kernel.h"

namespace nexus::cpu {

KernelVariants<CausalAttentionArgs> causal_attention_kernels();
KernelVariants<CausalAttentionBackwardArgs> causal_attention_backward_kernels();

// Floats of backward scratch per thread for sequences of t tokens.
inline int64_t attention_backward_scratch(int64_t t) { return t * t + t; }

}  // namespace nexus::cpu
