// Mixed-precision training: the precision activations are stored in (bf16 or fp16, with f32 math)
// and the dynamic loss scaler fp16 needs.
//
// What a precision means for TrainModel (see TrainOptions::precision): every activation a block
// saves for its backward is rounded to the precision right after the op that produces it and kept
// in 16 bits; weights are used as rounded copies of the f32 master weights; activation gradients
// are rounded the same way as they flow back. Parameter gradients, optimizer state and every sum
// stay f32. This is what bf16/fp16 autocast computes on a GPU, stored the same way, with the
// arithmetic done in f32 because this CPU has no bf16 or fp16 FMA.
#pragma once

#include <cstdint>
#include <string_view>

#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {
class ThreadPool;
}

namespace nexus::train {

using nexus::Precision;

// "f32", "bf16" or "f16".
const char* precision_name(Precision p);
// Accepts f32/fp32, bf16, f16/fp16 (case-insensitive); the error lists the choices.
Result<Precision> parse_precision(std::string_view name);

// The rounding itself is an op: ops/round.h (round_to, round_copy, round_pack, unpack).

// Dynamic loss scaling (as torch.cuda.amp.GradScaler): the loss gradient is multiplied by scale()
// so that small gradients do not flush to zero in fp16. After a step whose gradients are not all
// finite the step is skipped and the scale multiplied by `backoff`; after `growth_interval`
// finite steps in a row it is multiplied by `growth`. A static scaler never changes its scale.
struct LossScaleOptions {
  float init = 65536.0f;
  float growth = 2.0f;
  float backoff = 0.5f;
  int64_t growth_interval = 2000;
  bool dynamic = true;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleOptions& opts = {}) : opts_(opts), scale_(opts.init) {}
  float scale() const { return scale_; }
  // Records one step: `finite` is whether all its gradients were finite. Returns whether the
  // optimizer should apply the step (false: skip it).
  bool update(bool finite);
  int64_t good_steps() const { return good_; }    // finite steps since the last change
  int64_t skipped_steps() const { return skipped_; }  // over the whole run
  const LossScaleOptions& options() const { return opts_; }
  // For checkpoints: the state that makes a resumed run continue bit-exactly.
  void restore(float scale, int64_t good_steps, int64_t skipped_steps) {
    scale_ = scale, good_ = good_steps, skipped_ = skipped_steps;
  }

 private:
  LossScaleOptions opts_;
  float scale_;
  int64_t good_ = 0, skipped_ = 0;
};


}  // namespace nexus::train
