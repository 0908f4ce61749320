// CPU kernels of the embedding op: the variant tables the front-end (ops/embedding.h) and the op
// test use.
#pragma once

#include "backends/api/embedding.h"
#include "backends/api/kernel.h"

namespace nexus::cpu {

KernelVariants<EmbeddingArgs> embedding_kernels();
KernelVariants<EmbeddingBackwardArgs> embedding_backward_kernels();

}  // namespace nexus::cpu
