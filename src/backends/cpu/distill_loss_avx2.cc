// The distillation loss (distill_impl.h) built for AVX2/FMA.
#include "backends/cpu/distill_impl.h"
#include "backends/cpu/distill_loss.h"

namespace nexus::cpu {

void distill_loss_avx2(const DistillLossArgs& a, ThreadPool* pool) { distill_run(a, pool); }

}  // namespace nexus::cpu
