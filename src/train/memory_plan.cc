// measure_training_memory and find_max_batch (see memory_plan.h).
#include "nexus/train/memory_plan.h"

#include <algorithm>

#include "nexus/core/allocator.h"
#include "nexus/train/train_model.h"

namespace nexus::train {
namespace {

uint64_t current(MemCategory c) { return mem_stats().current[static_cast<int>(c)]; }

}  // namespace

Result<MemoryBreakdown> measure_training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq,
                                                const OptimizerOptions& opt,
                                                const TrainOptions& train) {
  MemoryBreakdown b;
  const uint64_t w0 = current(MemCategory::kWeights), o0 = current(MemCategory::kOptimizer),
                 a0 = current(MemCategory::kActivations);
  try {
    auto model = TrainModel::create(cfg, batch, seq, {}, train);
    if (!model) return model.status();
    b.params = current(MemCategory::kWeights) - w0;
    b.grads = current(MemCategory::kOptimizer) - o0;
    b.activations = current(MemCategory::kActivations) - a0;
    auto optimizer = make_optimizer(*model.value(), opt);
    if (!optimizer) return optimizer.status();
    b.optimizer = current(MemCategory::kOptimizer) - o0 - b.grads;
  } catch (const Error& e) {
    return Status::error(std::string("cannot build the model at batch ") + std::to_string(batch) +
                         ": " + e.what());
  }
  return b;
}

Result<BatchFit> find_max_batch(const ModelConfig& cfg, int64_t seq, const OptimizerOptions& opt,
                                uint64_t budget, int64_t max_batch,
                                const TrainOptions& train) {
  BatchFit fit;
  auto measure = [&](int64_t b) {
    ++fit.builds;
    return measure_training_memory(cfg, b, seq, opt, train);
  };
  auto m1 = measure(1);
  if (!m1) return m1.status();
  fit.at = m1.value();
  if (m1.value().total() > budget || max_batch < 1) return fit;  // batch 0: nothing fits
  auto m2 = measure(std::min<int64_t>(2, max_batch));
  if (!m2) return m2.status();
  // Linear prediction from batches 1 and 2, then walk to the exact boundary.
  const uint64_t fixed = m1.value().params + m1.value().grads + m1.value().optimizer;
  const double slope = std::max<double>(1.0, static_cast<double>(m2.value().activations) -
                                                 static_cast<double>(m1.value().activations));
  const double base = static_cast<double>(m1.value().activations) - slope;
  int64_t b = static_cast<int64_t>((static_cast<double>(budget - fixed) - base) / slope);
  b = std::clamp<int64_t>(b, 1, max_batch);
  auto at = measure(b);
  if (!at) return at.status();
  while (at.value().total() > budget && b > 1) {
    at = measure(--b);
    if (!at) return at.status();
  }
  for (;;) {
    if (b == max_batch) {
      fit.batch = b, fit.at = at.value(), fit.next = at.value();
      return fit;
    }
    auto up = measure(b + 1);
    if (!up) return up.status();
    if (up.value().total() > budget) {
      fit.batch = b, fit.at = at.value(), fit.next = up.value();
      return fit;
    }
    ++b;
    at = std::move(up);
  }
}

}  // namespace nexus::train
