// CPU kernels of the dense f32 layer (backends/api/dense.h): the variant tables the op front-end
// (ops/dense.h) and the op test use.
#pragma once

#include "backends/api/dense.h"
#include "backends/api/kernel.h"

namespace nexus::cpu {

KernelVariants<DenseArgs> dense_kernels();
KernelVariants<DenseBackwardArgs> dense_backward_kernels();

}  // namespace nexus::cpu
