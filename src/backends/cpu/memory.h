// CPU kernels of the compressive memory op (backends/api/memory.h): the variant tables.
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/memory.h"

namespace nexus::cpu {

// "scalar": each (sequence, key/value head) on its own, split over the pool.
KernelVariants<MemoryArgs> memory_kernels();
KernelVariants<MemoryBackwardArgs> memory_backward_kernels();

}  // namespace nexus::cpu
