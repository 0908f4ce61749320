// Training checkpoints: one GGUF file holding the parameters, the optimizer's state buffers, the
// data loader's position, the step and every setting needed to resume bit-exactly, plus the
// tokenizer's metadata, sealed by a checksum; written atomically, pruned to the last K.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/train/data_loader.h"
#include "nexus/train/optimizer.h"
#include "nexus/train/precision.h"
#include "nexus/train/train_model.h"

namespace nexus::train {

// Everything that fixes a run: resuming with the same settings continues it bit-exactly.
struct TrainSettings {
  ModelConfig model;
  int64_t batch = 4;  // sequences per micro-batch
  int64_t seq = 64;   // tokens per sequence
  int64_t accum = 1;  // micro-batches per optimizer step
  int64_t steps = 100;
  LrSchedule schedule;  // lr already scaled by --lr-scale-ref
  float clip = 1.0f;
  OptimizerOptions optimizer;
  uint64_t seed = 1234;  // initialisation and data order
  std::string data_path, val_path;
  bool documents = false;  // windows are samples (train --documents)
  std::string loss_after;  // train only on what follows it in each sample (--loss-after)
  uint64_t tokenizer_fingerprint = 0;  // of the vocabulary the data was tokenized with
  Precision precision = Precision::kF32;
  std::optional<LossScaleOptions> loss_scale;  // set: loss scaling (fp16)
};

// Where the run stands after `step` optimizer updates.
struct TrainProgress {
  int64_t step = 0;
  int64_t tokens = 0;  // tokens trained on so far
  DataLoaderState loader;
  // The loss scaler's state (with loss scaling).
  float loss_scale = 1.0f;
  int64_t loss_scale_good = 0, skipped_steps = 0;
};

// The checkpoint's file name for a step inside `dir`: DIR/ckpt-00000042.gguf.
std::string checkpoint_path(const std::string& dir, int64_t step);
// The checkpoints (by that name pattern) in `dir`, oldest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The newest checkpoint in `dir`, or an error naming the directory when there is none.
Result<std::string> latest_checkpoint(const std::string& dir);
// Deletes all but the newest `keep` checkpoints and any temporary file a killed writer left.
Status prune_checkpoints(const std::string& dir, int keep);

// Writes the checkpoint atomically (temporary file beside `path`, fsync, rename, fsync of the
// directory): `path` holds either the previous file or the complete new one, never a partial one.
// `tokenizer_source` (a GGUF whose tokenizer.* keys are copied) may be null.
Status save_checkpoint(const std::string& path, const TrainSettings& settings,
                       const TrainProgress& progress, const TrainModel& model, Optimizer& optimizer,
                       const GgufFile* tokenizer_source);

// A checkpoint opened and verified (format version, checksum over metadata and tensor data,
// tensor table against the model config). Errors name the file and the fault.
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const TrainSettings& settings() const { return settings_; }
  const TrainProgress& progress() const { return progress_; }
  int64_t optimizer_steps() const { return optimizer_steps_; }
  const std::string& optimizer_name() const { return settings_.optimizer.name; }
  // The file itself (its tokenizer.* keys are the run's tokenizer, when it had one).
  const GgufFile& file() const { return *file_; }
  bool has_tokenizer() const;

  // Copies the parameters into `model` (same config) and the state buffers and step count into
  // `optimizer` (same kind); errors name the tensor that does not fit.
  Status restore_model(TrainModel& model) const;
  Status restore_optimizer(Optimizer& optimizer) const;

 private:
  std::shared_ptr<const GgufFile> file_;
  TrainSettings settings_;
  TrainProgress progress_;
  int64_t optimizer_steps_ = 0;
};

}  // namespace nexus::train
