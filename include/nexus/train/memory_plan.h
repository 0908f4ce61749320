// Training memory of a model at a (batch, seq): parameters, gradients, optimizer state and the
// activation arena, measured by constructing the objects and reading the counting allocator
// (core/allocator.h), and the largest micro-batch that fits a budget.
#pragma once

#include <cstdint>

#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/train/optimizer.h"

namespace nexus::train {

struct MemoryBreakdown {
  uint64_t params = 0;       // MemCategory::kWeights while the model is built
  uint64_t grads = 0;        // the model's gradient array (kOptimizer)
  uint64_t optimizer = 0;    // the optimizer's state (kOptimizer, after make_optimizer)
  uint64_t activations = 0;  // the activation arena (kActivations)
  uint64_t total() const { return params + grads + optimizer + activations; }
};

// Builds a TrainModel for (batch, seq) and the named optimizer, and returns what each allocated.
// Everything a training step touches lives in these (a step allocates nothing; tested), so the
// total is the step's memory apart from the data loader's small ring and the process itself.
Result<MemoryBreakdown> measure_training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq,
                                                const OptimizerOptions& opt,
                                                const TrainOptions& train = {});

struct BatchFit {
  int64_t batch = 0;     // the largest micro-batch whose total fits (0: none does)
  MemoryBreakdown at;    // at `batch` (at batch 1 when none fits)
  MemoryBreakdown next;  // at batch + 1 (over the budget, unless batch == max_batch)
  int builds = 0;        // models constructed to find it
};

// The largest batch in [1, max_batch] with measure_training_memory(...).total() <= budget. The
// arena grows linearly in the batch up to 64-byte padding per buffer, so two measurements (batch
// 1 and 2) predict the answer and a few more confirm it exactly.
Result<BatchFit> find_max_batch(const ModelConfig& cfg, int64_t seq, const OptimizerOptions& opt,
                                uint64_t budget, int64_t max_batch,
                                const TrainOptions& train = {});

}  // namespace nexus::train
