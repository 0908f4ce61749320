// The fused cross-entropy over rows split across the pool; with mixed precision each row is
// rounded before its loss and its gradient after it while it is in cache (the same bits as
// rounding all the logits, then the loss, then rounding all the gradients).
#include "backends/cpu/cross_entropy.h"

#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/round.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

using RowFn = float (*)(float* row, int64_t v, int32_t target, float scale);
using RoundFn = void (*)(Precision p, const float* x, float* y, int64_t n);

template <RowFn row_fn, RoundFn round_fn>
void cross_entropy(const CrossEntropyArgs& a, ThreadPool* pool) {
  const bool round = a.round != Precision::kF32;
  par::for_ranges(pool, a.n, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* row = a.logits + i * a.v;
      if (round) round_fn(a.round, row, row, a.v);
      a.row_loss[i] = row_fn(row, a.v, a.targets[i], a.scale);
      if (round) round_fn(a.round, row, row, a.v);
    }
  });
}

bool avx512() { return avx512_active(); }

const KernelVariant<CrossEntropyArgs> kCrossEntropy[] = {
    {"avx512", avx512, cross_entropy<ce_row_avx512, round_avx2>},
    {"avx2", avx2_active, cross_entropy<ce_row_avx2, round_avx2>},
    {"scalar", always_available, cross_entropy<ce_row_scalar, round_scalar>},
};

}  // namespace

KernelVariants<CrossEntropyArgs> cross_entropy_kernels() { return kCrossEntropy; }

}  // namespace nexus::cpu
