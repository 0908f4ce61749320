// Arguments of the fused cross-entropy (ops/loss.h).
#pragma once

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus {

// For each of n rows of v logits: row_loss[i] = logsumexp(row) - row[targets[i]] (0 when
// targets[i] < 0), and the row is overwritten with d(scale * sum of row losses)/d row =
// (softmax - onehot) * scale (zeros for an ignored row). With `round` other than kF32 each row is
// rounded to it before its loss and its gradient after it (mixed precision's logits).
struct CrossEntropyArgs {
  float* logits;
  float* row_loss;
  const int32_t* targets;
  int64_t n, v;
  float scale;
  Precision round = Precision::kF32;
};

// Knowledge distillation (Hinton et al.), per row of v student logits s with the teacher's logits
// t: row_loss[i] = alpha * CE(s, target) + (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s / T)),
// and the row overwritten with its gradient times scale:
// alpha * (softmax(s) - onehot) + (1 - alpha) * T * (softmax(s / T) - softmax(t / T)).
// A row whose target is < 0 has no loss and a zero gradient.
struct DistillLossArgs {
  float* logits;
  const float* teacher;
  float* row_loss;
  const int32_t* targets;
  int64_t n, v;
  float scale, temperature, alpha;
};

}  // namespace nexus
