// The distillation loss's variant table: the AVX2 build, then the portable reference.
#include "backends/cpu/distill_loss.h"

#include "backends/cpu/distill_impl.h"
#include "backends/cpu/isa.h"

namespace nexus::cpu {
namespace {

const KernelVariant<DistillLossArgs> kDistill[] = {
    {"avx2", avx2_active, distill_loss_avx2},
    {"scalar", always_available, distill_run},
};

}  // namespace

KernelVariants<DistillLossArgs> distill_loss_kernels() { return kDistill; }

}  // namespace nexus::cpu
