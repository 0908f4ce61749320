// CPU kernels of the distillation loss (backends/api/loss.h): the AVX2 build and the portable
// reference of distill_impl.h's row kernel.
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/loss.h"

namespace nexus::cpu {

KernelVariants<DistillLossArgs> distill_loss_kernels();
void distill_loss_avx2(const DistillLossArgs& a, ThreadPool* pool);

}  // namespace nexus::cpu
