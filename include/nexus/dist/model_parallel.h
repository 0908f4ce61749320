// What `nexus train` needs of a model-parallel exchange (tensor_parallel.h, pipeline_parallel.h):
// the part of the model this rank trains, and the cut and gather of parameters and optimizer
// state between the full model and that part (checkpoints and the export keep the one-process
// format, so a run resumes with any split or none).
#pragma once

#include <span>

#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/trainer.h"

namespace nexus::dist {

class ModelParallel : public train::GradientExchange {
 public:
  // This rank's part: its config and the TrainOptions fields that make a TrainModel that part.
  virtual ModelConfig part_config() const = 0;
  virtual void configure(train::TrainOptions* o) = 0;
  // The part's parameter layout (that of its TrainModel).
  virtual std::span<const train::ParamInfo> part_tensors() const = 0;
  // This rank's part of a full-layout array (parameters, or an element-wise optimizer buffer),
  // and every rank's parts into the full layout on rank 0 (collective; `full` is empty on the
  // other ranks).
  virtual void cut(std::span<const float> full, std::span<float> part) const = 0;
  virtual void gather(std::span<const float> part, std::span<float> full) = 0;
  // Floats of the full layout and of this rank's part.
  virtual size_t full_floats() const = 0;
  virtual size_t part_floats() const = 0;
  // cut and gather for every state buffer of two optimizers of one kind (`full` null on the ranks
  // but 0 when gathering), with the step count; element-wise f32 state only (AdamW, SGD), else an
  // error naming the buffer.
  Status cut_state(train::Optimizer& full, train::Optimizer& part) const;
  Status gather_state(train::Optimizer& part, train::Optimizer* full);
  // "tensor parallel", "pipeline parallel".
  virtual const char* kind() const = 0;
};

}  // namespace nexus::dist
