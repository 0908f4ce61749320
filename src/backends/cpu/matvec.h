// The dequantizing matrix-vector product's CPU reference (backends/api/matvec.h).
#pragma once

#include "backends/api/kernel.h"
#include "backends/api/matvec.h"

namespace nexus::cpu {

// Rows split across the pool; each row dequantized once, then its dot with every x in order.
KernelVariants<MatvecArgs> matvec_kernels();

}  // namespace nexus::cpu
